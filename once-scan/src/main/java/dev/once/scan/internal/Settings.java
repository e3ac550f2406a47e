package dev.once.scan.internal;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.expr.BooleanLiteralExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.IntegerLiteralExpr;
import com.github.javaparser.ast.expr.LiteralStringValueExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import dev.once.scan.Location;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * Consumer settings as the repository states them: Spring {@code application*.yml} and
 * {@code .properties} (relaxed names), and client properties put in Java
 * ({@code props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false")}). Kept per module (the
 * directory of the nearest build file), and per file for the Java ones, because one service may
 * turn auto-commit on and the next off.
 */
final class Settings {

    /**
     * One stated setting.
     *
     * @param value   the value as written, or the expression for a non-literal one
     * @param literal false when the value is computed at run time (a parameter, a condition)
     */
    record Setting(String value, Location location, boolean literal) {
        boolean isTrue() {
            return literal && value.equalsIgnoreCase("true");
        }

        boolean isFalse() {
            return literal && value.equalsIgnoreCase("false");
        }

        long asLong(long otherwise) {
            try {
                return Long.parseLong(value.replace("_", "").replace("L", ""));
            } catch (NumberFormatException e) {
                return otherwise;
            }
        }
    }

    private final Map<Path, Map<String, Setting>> byModule = new HashMap<>();
    private final Map<String, Map<String, Setting>> byFile = new HashMap<>();
    private final Repo repo;

    Settings(Repo repo) {
        this.repo = repo;
        for (Path f : repo.otherFiles) {
            String n = f.getFileName().toString();
            if (!n.startsWith("application") && !n.startsWith("bootstrap")) {
                continue;
            }
            Map<String, Setting> m = byModule.computeIfAbsent(repo.moduleOf(f), k -> new HashMap<>());
            try {
                if (n.endsWith(".properties")) {
                    readProperties(f, m);
                } else if (n.endsWith(".yml") || n.endsWith(".yaml")) {
                    readYaml(f, m);
                }
            } catch (IOException | RuntimeException e) {
                // a config file we cannot read is skipped, like a file that does not parse
            }
        }
        for (Repo.Source s : repo.sources()) {
            for (MethodCallExpr call : s.cu().findAll(MethodCallExpr.class)) {
                String n = call.getNameAsString();
                if ((n.equals("put") || n.equals("setProperty") || n.equals("putIfAbsent"))
                        && call.getArguments().size() == 2) {
                    String key = keyOf(call.getArgument(0));
                    if (key == null) {
                        continue;
                    }
                    Expression v = call.getArgument(1);
                    Setting st = new Setting(valueOf(v), repo.loc(call), isLiteral(v));
                    byFile.computeIfAbsent(s.rel(), k -> new HashMap<>()).put(norm(key), st);
                    byModule.computeIfAbsent(s.module(), k -> new HashMap<>()).putIfAbsent(norm(key), st);
                }
            }
        }
    }

    /** A Kafka client key from {@code ConsumerConfig.MAX_POLL_RECORDS_CONFIG} or {@code "max.poll.records"}. */
    private static String keyOf(Expression e) {
        if (e instanceof StringLiteralExpr s && s.getValue().matches("[a-z][a-z0-9.\\-]+")) {
            return s.getValue();
        }
        String name = e instanceof FieldAccessExpr fa
                ? fa.getNameAsString()
                : e instanceof NameExpr ne ? ne.getNameAsString() : null;
        if (name != null && name.endsWith("_CONFIG")) {
            return name.substring(0, name.length() - "_CONFIG".length())
                    .toLowerCase(Locale.ROOT)
                    .replace('_', '.');
        }
        return null;
    }

    private static boolean isLiteral(Expression e) {
        if (e instanceof StringLiteralExpr
                || e instanceof BooleanLiteralExpr
                || e instanceof IntegerLiteralExpr
                || e instanceof com.github.javaparser.ast.expr.LongLiteralExpr) {
            return true;
        }
        if (e instanceof FieldAccessExpr fa) { // Boolean.TRUE
            return fa.getNameAsString().equals("TRUE") || fa.getNameAsString().equals("FALSE");
        }
        if (e instanceof MethodCallExpr mc
                && mc.getNameAsString().equals("toString")
                && mc.getScope().isPresent()) {
            return isLiteral(mc.getScope().get());
        }
        return false;
    }

    private static String valueOf(Expression e) {
        if (e instanceof LiteralStringValueExpr l) {
            return l.getValue();
        }
        if (e instanceof BooleanLiteralExpr b) {
            return String.valueOf(b.getValue());
        }
        if (e instanceof FieldAccessExpr fa
                && (fa.getNameAsString().equals("TRUE") || fa.getNameAsString().equals("FALSE"))) {
            return fa.getNameAsString().toLowerCase(Locale.ROOT);
        }
        return e.toString();
    }

    /** Spring's relaxed binding: case, dashes and underscores do not matter. */
    static String norm(String key) {
        return key.toLowerCase(Locale.ROOT).replace("-", "").replace("_", "");
    }

    /** The setting for a file: stated in the file itself, else in its module. */
    Setting get(Repo.Source s, String key) {
        Map<String, Setting> f = byFile.get(s.rel());
        if (f != null && f.containsKey(norm(key))) {
            return f.get(norm(key));
        }
        return module(s.module(), key);
    }

    /**
     * The client settings put in one piece of code (the method that builds a consumer's
     * {@code Properties} or map), or empty when that code also takes settings it does not show
     * ({@code load(…)}, {@code putAll(…)}, a copy of another map): then the file's and module's
     * settings still speak for it.
     */
    Optional<Map<String, Setting>> statedIn(Node scope) {
        Map<String, Setting> out = new HashMap<>();
        for (MethodCallExpr call : scope.findAll(MethodCallExpr.class)) {
            String n = call.getNameAsString();
            if (n.equals("load") || n.equals("putAll")) {
                return Optional.empty();
            }
            if ((n.equals("put") || n.equals("setProperty") || n.equals("putIfAbsent"))
                    && call.getArguments().size() == 2) {
                String key = keyOf(call.getArgument(0));
                if (key != null) {
                    Expression v = call.getArgument(1);
                    out.put(norm(key), new Setting(valueOf(v), repo.loc(call), isLiteral(v)));
                }
            }
        }
        for (com.github.javaparser.ast.expr.ObjectCreationExpr oc :
                scope.findAll(com.github.javaparser.ast.expr.ObjectCreationExpr.class)) {
            if (!oc.getArguments().isEmpty() && oc.getType().getNameAsString().matches("Properties|HashMap")) {
                return Optional.empty(); // a copy of settings made elsewhere
            }
        }
        return out.isEmpty() ? Optional.empty() : Optional.of(out);
    }

    /** The setting stated for a module (or at the root, which applies to all). */
    Setting module(Path module, String key) {
        Map<String, Setting> m = byModule.get(module);
        if (m != null && m.containsKey(norm(key))) {
            return m.get(norm(key));
        }
        Map<String, Setting> r = byModule.get(repo.root);
        return r == null ? null : r.get(norm(key));
    }

    /** The first of several keys that is stated. */
    Setting first(Repo.Source s, List<String> keys) {
        for (String k : keys) {
            Setting st = k.startsWith("spring.") ? module(s.module(), k) : get(s, k);
            if (st != null) {
                return st;
            }
        }
        return null;
    }

    /** True if the module (or root) states any key starting with this prefix. */
    boolean hasPrefix(Path module, String prefix) {
        String p = norm(prefix);
        for (Path m : List.of(module, repo.root)) {
            Map<String, Setting> map = byModule.get(m);
            if (map != null && map.keySet().stream().anyMatch(k -> k.startsWith(p))) {
                return true;
            }
        }
        return false;
    }

    private void readProperties(Path f, Map<String, Setting> m) throws IOException {
        List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
        for (int i = 0; i < lines.size(); i++) {
            String l = lines.get(i).strip();
            if (l.isEmpty() || l.startsWith("#") || l.startsWith("!")) {
                continue;
            }
            int eq = indexOfSeparator(l);
            if (eq < 0) {
                continue;
            }
            String k = l.substring(0, eq).strip();
            String v = l.substring(eq + 1).strip();
            m.put(norm(k), new Setting(v, repo.loc(f, i + 1, l), !v.startsWith("${")));
        }
    }

    private static int indexOfSeparator(String l) {
        int eq = l.indexOf('=');
        int colon = l.indexOf(':');
        if (eq < 0) {
            return colon;
        }
        return colon < 0 ? eq : Math.min(eq, colon);
    }

    private void readYaml(Path f, Map<String, Setting> m) throws IOException {
        List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
        try (JsonParser p = new YAMLFactory().createParser(f.toFile())) {
            Deque<String> path = new ArrayDeque<>();
            Deque<Boolean> inArray = new ArrayDeque<>();
            String field = null;
            JsonToken t;
            while ((t = p.nextToken()) != null) {
                switch (t) {
                    case FIELD_NAME -> field = p.currentName();
                    case START_OBJECT -> {
                        if (field != null) {
                            path.addLast(field);
                        } else {
                            path.addLast("");
                        }
                        inArray.push(false);
                        field = null;
                    }
                    case END_OBJECT -> {
                        path.pollLast();
                        inArray.poll();
                    }
                    case START_ARRAY, END_ARRAY -> field = null;
                    default -> {
                        if (t.isScalarValue() && field != null) {
                            StringBuilder key = new StringBuilder();
                            for (String s : path) {
                                if (!s.isEmpty()) {
                                    key.append(s).append('.');
                                }
                            }
                            key.append(field);
                            int line = p.currentTokenLocation().getLineNr();
                            String v = p.getValueAsString();
                            String snippet = line >= 1 && line <= lines.size() ? lines.get(line - 1) : key.toString();
                            m.put(
                                    norm(key.toString()),
                                    new Setting(
                                            v == null ? "" : v,
                                            repo.loc(f, line, snippet),
                                            v != null && !v.startsWith("${")));
                            field = null;
                        }
                    }
                }
            }
        }
    }
}
