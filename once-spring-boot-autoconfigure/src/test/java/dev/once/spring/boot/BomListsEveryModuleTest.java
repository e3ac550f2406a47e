package dev.once.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import javax.xml.parsers.DocumentBuilderFactory;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;
import org.w3c.dom.NodeList;

/**
 * A user who imports {@code once-bom} as the README says can depend on every published module without a
 * version: the BOM's {@code dependencyManagement} names each module of the reactor (the benchmarks, the
 * fault tests, the examples and the BOM itself are not published), at the reactor's version.
 */
class BomListsEveryModuleTest {

    static final Path ROOT = Path.of("..");

    @Test
    void theBomManagesEveryPublishedModuleAtTheReactorsVersion() throws Exception {
        Document reactor = parse(ROOT.resolve("pom.xml"));
        String version = text(reactor.getDocumentElement(), "version");
        List<String> published = new ArrayList<>();
        for (Element module : children(child(reactor.getDocumentElement(), "modules"), "module")) {
            String dir = module.getTextContent().strip();
            if (dir.equals("once-bom")
                    || dir.equals("once-bench")
                    || dir.equals("once-chaos")
                    || dir.startsWith("examples/")) {
                continue;
            }
            Document pom = parse(ROOT.resolve(dir).resolve("pom.xml"));
            published.add(text(pom.getDocumentElement(), "artifactId"));
        }

        Document bom = parse(ROOT.resolve("once-bom/pom.xml"));
        assertThat(text(bom.getDocumentElement(), "version"))
                .as("once-bom's version equals the reactor's")
                .isEqualTo(version);
        Map<String, String> managed = new TreeMap<>();
        Element dm = child(child(bom.getDocumentElement(), "dependencyManagement"), "dependencies");
        for (Element d : children(dm, "dependency")) {
            if (text(d, "groupId").equals("dev.once")) {
                managed.put(text(d, "artifactId"), text(d, "version"));
            }
        }
        assertThat(managed.keySet())
                .as("once-bom/pom.xml manages every published module of the reactor (without one, a user's"
                        + " versionless dependency fails with \"'dependencies.dependency.version' ... is missing\")")
                .containsAll(published);
        managed.forEach((artifact, v) ->
                assertThat(v).as("version of %s in once-bom", artifact).isEqualTo("${project.version}"));
    }

    static Document parse(Path pom) throws Exception {
        return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(Files.newInputStream(pom));
    }

    static Element child(Element parent, String name) {
        List<Element> found = children(parent, name);
        if (found.isEmpty()) {
            throw new AssertionError("<" + parent.getTagName() + "> has no <" + name + ">");
        }
        return found.get(0);
    }

    static List<Element> children(Element parent, String name) {
        List<Element> found = new ArrayList<>();
        NodeList nodes = parent.getChildNodes();
        for (int i = 0; i < nodes.getLength(); i++) {
            if (nodes.item(i).getNodeType() == Node.ELEMENT_NODE
                    && ((Element) nodes.item(i)).getTagName().equals(name)) {
                found.add((Element) nodes.item(i));
            }
        }
        return found;
    }

    static String text(Element parent, String name) {
        return child(parent, name).getTextContent().strip();
    }
}
