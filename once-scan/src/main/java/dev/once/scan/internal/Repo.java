package dev.once.scan.internal;

import com.github.javaparser.JavaParser;
import com.github.javaparser.ParserConfiguration;
import com.github.javaparser.ast.CompilationUnit;
import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.ClassOrInterfaceDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.type.ClassOrInterfaceType;
import com.github.javaparser.symbolsolver.JavaSymbolSolver;
import com.github.javaparser.symbolsolver.resolution.typesolvers.CombinedTypeSolver;
import com.github.javaparser.symbolsolver.resolution.typesolvers.JavaParserTypeSolver;
import com.github.javaparser.symbolsolver.resolution.typesolvers.ReflectionTypeSolver;
import dev.once.scan.Location;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The scanned repository: its Java sources parsed (test sources left out: they are not
 * production consumers), its configuration and schema files, and an index of its own types so
 * calls can be followed into them.
 */
public final class Repo {

    private static final Set<String> SKIPPED_DIRS =
            Set.of(".git", "target", "build", "node_modules", ".idea", ".gradle", "out", ".mvn");

    final Path root;
    final List<Source> sources = new ArrayList<>();
    final List<Path> otherFiles = new ArrayList<>();
    /** Simple type name → declarations with that name. */
    final Map<String, List<TypeDeclaration<?>>> types = new HashMap<>();
    /** Simple supertype name → classes that extend or implement it. */
    final Map<String, List<ClassOrInterfaceDeclaration>> subtypes = new HashMap<>();

    long lines;
    int unresolved;

    private record Parsed(Path file, CompilationUnit cu, String[] lines) {}

    /** One parsed Java file. */
    record Source(Path path, String rel, CompilationUnit cu, String[] lines, Path module) {}

    private Repo(Path root) {
        this.root = root;
    }

    /** Parses every Java file under {@code root} outside test sources. */
    public static Repo load(Path root) {
        Repo repo = new Repo(root.toAbsolutePath().normalize());
        List<Path> java = new ArrayList<>();
        Set<Path> sourceRoots = new LinkedHashSet<>();
        try {
            Files.walkFileTree(repo.root, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                    String n =
                            dir.getFileName() == null ? "" : dir.getFileName().toString();
                    if (!dir.equals(repo.root) && (SKIPPED_DIRS.contains(n) || isTestDir(repo.root.relativize(dir)))) {
                        return FileVisitResult.SKIP_SUBTREE;
                    }
                    if (n.equals("java")
                            && dir.getParent() != null
                            && String.valueOf(dir.getParent().getFileName()).equals("main")) {
                        sourceRoots.add(dir);
                    }
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                    String n = file.getFileName().toString();
                    if (n.endsWith(".java")) {
                        java.add(file);
                    } else if (n.endsWith(".sql")
                            || n.endsWith(".yml")
                            || n.endsWith(".yaml")
                            || n.endsWith(".properties")
                            || n.endsWith(".xml")
                            || n.equals("build.gradle")
                            || n.equals("build.gradle.kts")) {
                        repo.otherFiles.add(file);
                    }
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + root, e);
        }
        ParserConfiguration config = new ParserConfiguration()
                // RAW: any Java level parses, and the validators (a third of the parse time) do not run
                .setLanguageLevel(ParserConfiguration.LanguageLevel.RAW)
                // no comment attribution: the scan reads nodes, not comments (tokens stay: node ranges need them)
                .setAttributeComments(false);
        if (Types.SOLVER) {
            CombinedTypeSolver solver = new CombinedTypeSolver(new ReflectionTypeSolver());
            for (Path sr : sourceRoots) {
                solver.add(new JavaParserTypeSolver(sr));
            }
            config.setSymbolResolver(new JavaSymbolSolver(solver));
        }
        // one parser per thread (a JavaParser is not thread-safe)
        repo.parsers = ThreadLocal.withInitial(() -> new JavaParser(config));
        java.sort(null);
        List<RawFile> raw = java.parallelStream()
                .map(file -> {
                    try {
                        return new RawFile(file, Files.readString(file, StandardCharsets.UTF_8));
                    } catch (IOException | UncheckedIOException e) {
                        return null; // unreadable or not UTF-8: skip the file, not the scan
                    }
                })
                .filter(Objects::nonNull)
                .toList();
        List<RawFile> seeds = new ArrayList<>();
        for (RawFile f : raw) {
            repo.raw.add(f);
            repo.files++;
            repo.lines += f.text().chars().filter(ch -> ch == '\n').count() + 1;
            Matcher d = DECLARES.matcher(f.text());
            while (d.find()) {
                repo.declares
                        .computeIfAbsent(d.group(1), k -> new ArrayList<>())
                        .add(f);
            }
            Matcher x = EXTENDS.matcher(f.text());
            while (x.find()) {
                Matcher name = NAME.matcher(x.group(1));
                while (name.find()) {
                    repo.extenders
                            .computeIfAbsent(name.group(), k -> new ArrayList<>())
                            .add(f);
                }
            }
            if (SEED.matcher(f.text()).find()) {
                seeds.add(f);
            }
        }
        repo.parse(seeds);
        return repo;
    }

    /** A Java file read but not necessarily parsed yet. */
    record RawFile(Path file, String text) {}

    /**
     * Words of the files parsed up front: where an entry point, a consumer setting, a dedupe or an
     * entity can be. Every other file is parsed when the trace first needs a type it declares or
     * extends, so a large repository costs the files its consumers reach, not all of them.
     */
    private static final Pattern SEED = Pattern.compile(
            "Listener|Handler|Consumer|Receiver|Subscriber|poll\\(|receive|basicConsume|basicGet|subscribe|fetch\\("
                    + "|nextMessage|iterate\\(|RouteBuilder|IntegrationFlow|ServiceActivator|Function<|KStream|Processor"
                    + "|@Entity|@Table|@Document|auto\\.commit|AUTO_COMMIT|max\\.poll|MAX_POLL|AcknowledgeMode"
                    + "|DuplicateMessageDetector|IdempotentConsumer|Inbox|@Incoming|JobWorker|MessageListenerAdapter|onMessage"
                    + "|ValueMapper|Transformer");

    private static final Pattern DECLARES =
            Pattern.compile("\\b(?:class|interface|enum|record)\\s+([A-Za-z_$][\\w$]*)");
    private static final Pattern EXTENDS = Pattern.compile("\\b(?:extends|implements)\\s+([^{;()]+)");
    private static final Pattern NAME = Pattern.compile("[A-Z][\\w$]*");

    private final List<RawFile> raw = new ArrayList<>();
    private final Map<String, List<RawFile>> declares = new HashMap<>();
    private final Map<String, List<RawFile>> extenders = new HashMap<>();
    private final Set<Path> parsed = new java.util.HashSet<>();
    private final Map<Path, Path> modules = new java.util.concurrent.ConcurrentHashMap<>();
    private ThreadLocal<JavaParser> parsers;
    int files;

    /** Every Java file of the repository, parsed or not: text searches (timeouts, settings) read these. */
    List<RawFile> rawFiles() {
        return raw;
    }

    /** The parsed sources so far (a copy: the trace may parse more while a caller iterates). */
    List<Source> sources() {
        return List.copyOf(sources);
    }

    private void parse(List<RawFile> files) {
        List<RawFile> todo =
                files.stream().filter(f -> !parsed.contains(f.file())).toList();
        if (todo.isEmpty()) {
            return;
        }
        todo.forEach(f -> parsed.add(f.file()));
        List<Parsed> out = (todo.size() > 8 ? todo.parallelStream() : todo.stream())
                .map(f -> parsers.get()
                        .parse(f.text())
                        .getResult()
                        .map(cu -> new Parsed(f.file(), cu, f.text().split("\\r?\\n", -1)))
                        .orElse(null))
                .filter(Objects::nonNull)
                .toList();
        for (Parsed p : out) {
            add(new Source(p.file(), rel(root, p.file()), p.cu(), p.lines(), moduleOf(p.file())));
        }
    }

    static boolean isTestDir(Path rel) {
        String s = rel.toString().replace('\\', '/');
        return s.endsWith("src/test") || s.equals("src/test") || s.endsWith("src/it") || s.endsWith("src/testFixtures");
    }

    static String rel(Path root, Path file) {
        return root.relativize(file).toString().replace('\\', '/');
    }

    private void add(Source s) {
        sources.add(s);
        s.cu().setData(SOURCE, s);
        for (TypeDeclaration<?> t : s.cu().findAll(TypeDeclaration.class)) {
            types.computeIfAbsent(t.getNameAsString(), k -> new ArrayList<>()).add(t);
            if (t instanceof ClassOrInterfaceDeclaration c) {
                List<ClassOrInterfaceType> supers = new ArrayList<>(c.getExtendedTypes());
                supers.addAll(c.getImplementedTypes());
                for (ClassOrInterfaceType st : supers) {
                    subtypes.computeIfAbsent(st.getNameAsString(), k -> new ArrayList<>())
                            .add(c);
                }
            }
        }
    }

    static final com.github.javaparser.ast.DataKey<Source> SOURCE = new com.github.javaparser.ast.DataKey<>() {};

    /** The nearest directory above {@code file} with a build file, else the root. */
    Path moduleOf(Path file) {
        return file.getParent() == null ? root : modules.computeIfAbsent(file.getParent(), this::moduleOfDir);
    }

    private Path moduleOfDir(Path dir) {
        for (Path d = dir; d != null && d.startsWith(root); d = d.getParent()) {
            if (Files.exists(d.resolve("pom.xml"))
                    || Files.exists(d.resolve("build.gradle"))
                    || Files.exists(d.resolve("build.gradle.kts"))) {
                return d;
            }
        }
        return root;
    }

    /** The source a node is in. */
    Source sourceOf(Node n) {
        return n.findCompilationUnit().map(cu -> cu.getData(SOURCE)).orElse(null);
    }

    /** Where a node starts. */
    Location loc(Node n) {
        Source s = sourceOf(n);
        // a chained call is reported at its own name, not where the chain starts
        Node at = n instanceof com.github.javaparser.ast.expr.MethodCallExpr mc ? mc.getName() : n;
        int line = at.getBegin().map(p -> p.line).orElse(1);
        int col = at.getBegin().map(p -> p.column).orElse(1);
        if (s == null) {
            return new Location("?", line, col, "");
        }
        String snippet = line - 1 < s.lines().length ? s.lines()[line - 1] : "";
        return new Location(s.rel(), line, col, snippet);
    }

    Location loc(Path file, int line, String snippet) {
        return new Location(rel(root, file), Math.max(1, line), 1, snippet);
    }

    /** Types declared in the repository with this simple name. */
    List<TypeDeclaration<?>> types(String simpleName) {
        List<RawFile> in = declares.get(simpleName);
        if (in != null) {
            parse(in);
        }
        return types.getOrDefault(simpleName, List.of());
    }

    /**
     * {@code @Bean} methods that return {@code simpleName} (a lambda or anonymous class standing in
     * for an implementation), from the files that mention both, parsed on first use.
     */
    List<MethodDeclaration> beanFactories(String simpleName) {
        return beanFactories.computeIfAbsent(simpleName, this::findBeanFactories);
    }

    private final Map<String, List<MethodDeclaration>> beanFactories = new HashMap<>();

    private List<MethodDeclaration> findBeanFactories(String simpleName) {
        Pattern returns = Pattern.compile("\\b" + Pattern.quote(simpleName) + "\\s+\\w+\\s*\\(");
        parse(raw.stream()
                .filter(f ->
                        f.text().contains("@Bean") && returns.matcher(f.text()).find())
                .toList());
        List<MethodDeclaration> out = new ArrayList<>();
        for (Source s : sources()) {
            if (!String.join("\n", s.lines()).contains("@Bean")) {
                continue;
            }
            for (MethodDeclaration m : s.cu().findAll(MethodDeclaration.class)) {
                if (m.isAnnotationPresent("Bean")
                        && m.getType().isClassOrInterfaceType()
                        && m.getType()
                                .asClassOrInterfaceType()
                                .getNameAsString()
                                .equals(simpleName)
                        && m.getBody().isPresent()) {
                    out.add(m);
                }
            }
        }
        return out;
    }

    /** Classes of the repository that extend or implement {@code simpleName}, parsed on first use. */
    private List<ClassOrInterfaceDeclaration> subtypes(String simpleName) {
        List<RawFile> in = extenders.get(simpleName);
        if (in != null) {
            parse(in);
        }
        return subtypes.getOrDefault(simpleName, List.of());
    }

    /**
     * The declarations a simple name means where {@code from} is written, as javac would read it:
     * the single-type import, then the same package, then an on-demand import, then the same module
     * (build file). Two services with a {@code ReviewRepository} each never resolve to each other's.
     * All of them when none of these narrows it down (a name the file does not import at all).
     */
    List<TypeDeclaration<?>> types(String simpleName, Node from) {
        List<TypeDeclaration<?>> all = types(simpleName);
        Source src = from == null ? null : sourceOf(from);
        if (all.size() <= 1 || src == null) {
            return all;
        }
        String pkg =
                src.cu().getPackageDeclaration().map(pd -> pd.getNameAsString()).orElse("");
        for (com.github.javaparser.ast.ImportDeclaration imp : src.cu().getImports()) {
            if (!imp.isStatic()
                    && !imp.isAsterisk()
                    && imp.getName().getIdentifier().equals(simpleName)) {
                List<TypeDeclaration<?>> hit = all.stream()
                        .filter(t -> t.getFullyQualifiedName()
                                .map(q -> q.equals(imp.getNameAsString()))
                                .orElse(false))
                        .toList();
                if (!hit.isEmpty()) {
                    return hit;
                }
            }
        }
        List<TypeDeclaration<?>> samePackage =
                all.stream().filter(t -> packageOf(t).equals(pkg)).toList();
        if (!samePackage.isEmpty()) {
            return samePackage;
        }
        for (com.github.javaparser.ast.ImportDeclaration imp : src.cu().getImports()) {
            if (!imp.isStatic() && imp.isAsterisk()) {
                List<TypeDeclaration<?>> hit = all.stream()
                        .filter(t -> packageOf(t).equals(imp.getNameAsString()))
                        .toList();
                if (!hit.isEmpty()) {
                    return hit;
                }
            }
        }
        List<TypeDeclaration<?>> sameModule = all.stream()
                .filter(t -> {
                    Source ts = sourceOf(t);
                    return ts != null && ts.module().equals(src.module());
                })
                .toList();
        return sameModule.isEmpty() ? all : sameModule;
    }

    private static String packageOf(TypeDeclaration<?> t) {
        return t.findCompilationUnit()
                .flatMap(cu -> cu.getPackageDeclaration())
                .map(pd -> pd.getNameAsString())
                .orElse("");
    }

    /** Methods named {@code name} taking {@code args} arguments in the type and its repository supertypes and subtypes. */
    List<MethodDeclaration> methods(String typeName, String name, int args) {
        return methods(typeName, name, args, null);
    }

    /** As {@link #methods(String, String, int)}, with the type read as written at {@code from} (see {@link #types(String, Node)}). */
    List<MethodDeclaration> methods(String typeName, String name, int args, Node from) {
        List<MethodDeclaration> out = new ArrayList<>();
        Set<String> seen = new LinkedHashSet<>();
        collect(typeName, name, args, out, seen, true, 0, from);
        return out;
    }

    private void collect(
            String typeName,
            String name,
            int args,
            List<MethodDeclaration> out,
            Set<String> seen,
            boolean down,
            int depth,
            Node from) {
        if (depth > 4 || !seen.add(typeName + down)) {
            return;
        }
        List<TypeDeclaration<?>> declared = types(typeName, from);
        for (TypeDeclaration<?> t : declared) {
            for (MethodDeclaration m : t.getMethodsByName(name)) {
                if (m.getParameters().size() == args
                        || (m.getParameters().size() > 0
                                && m.getParameters()
                                        .getLast()
                                        .map(p -> p.isVarArgs())
                                        .orElse(false))) {
                    out.add(m);
                }
            }
            if (t instanceof ClassOrInterfaceDeclaration c) {
                for (ClassOrInterfaceType st : c.getExtendedTypes()) {
                    collect(st.getNameAsString(), name, args, out, seen, false, depth + 1, t);
                }
            }
        }
        if (down) {
            for (ClassOrInterfaceDeclaration sub : subtypes(typeName)) {
                // an implementation of a type of the same simple name in another module is not one of these
                boolean ofThese = declared.size() == types(typeName).size()
                        || types(typeName, sub).stream().anyMatch(declared::contains);
                if (ofThese) {
                    collect(sub.getNameAsString(), name, args, out, seen, true, depth + 1, sub);
                }
            }
        }
    }
}
