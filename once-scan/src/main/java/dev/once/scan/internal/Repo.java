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
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
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

    private record Parsed(Path file, CompilationUnit cu, String[] lines, String text) {}

    /** One parsed Java file, with its text (word checks read the text, never a printed AST). */
    record Source(Path path, String rel, CompilationUnit cu, String[] lines, Path module, String text) {}

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
                .setAttributeComments(false)
                // nor the count of each line ending the file uses (a map update per character read)
                .setDetectOriginalLineSeparator(false);
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
            Set<String> declared = new java.util.HashSet<>();
            Matcher d = DECLARES.matcher(f.text());
            while (d.find()) {
                repo.declares
                        .computeIfAbsent(d.group(1), k -> new ArrayList<>())
                        .add(f);
                declared.add(d.group(1));
            }
            Set<String> supers = new java.util.HashSet<>();
            Matcher x = EXTENDS.matcher(f.text());
            while (x.find()) {
                Matcher name = NAME.matcher(x.group(1));
                while (name.find()) {
                    repo.extenders
                            .computeIfAbsent(name.group(), k -> new ArrayList<>())
                            .add(f);
                    supers.add(name.group());
                }
            }
            repo.declaredIn.put(f.file(), declared);
            repo.supersOf.put(f.file(), supers);
            if (seeded(f.text())) {
                seeds.add(f);
            }
        }
        // the project's own annotations declared over a listener's (Spring Kafka, AMQP and JMS document
        // @KafkaListener/@RabbitListener/@JmsListener as meta-annotations), directly or over another such annotation:
        // a file using one holds a listener without any seed word of its own
        Map<String, Set<String>> over = new HashMap<>();
        Map<String, RawFile> declaring = new HashMap<>();
        for (RawFile f : raw) {
            if (!f.text().contains("@interface")) {
                continue;
            }
            Matcher a = ANNOTATION_TYPE.matcher(f.text());
            while (a.find()) {
                over.put(a.group(1), annotationsBefore(f.text(), a.start()));
                declaring.put(a.group(1), f);
            }
        }
        Set<String> meta = new HashSet<>();
        for (boolean grew = true; grew; ) {
            grew = false;
            for (Map.Entry<String, Set<String>> d : over.entrySet()) {
                if (!meta.contains(d.getKey())
                        && d.getValue().stream().anyMatch(n -> meta.contains(n) || EntryPoints.listenerAnnotation(n))) {
                    meta.add(d.getKey());
                    grew = true;
                }
            }
        }
        if (!meta.isEmpty()) {
            Set<RawFile> seeded = Collections.newSetFromMap(new IdentityHashMap<>());
            seeded.addAll(seeds);
            for (RawFile f : raw) {
                if (!seeded.contains(f)
                        && meta.stream().anyMatch(n -> f.text().contains("@" + n) || declaring.get(n) == f)) {
                    seeds.add(f);
                }
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
     *
     * <p>The words are the names the entry-point, settings and schema readers match on, not their
     * common suffixes: a project's own {@code MetricsStreamProcessor}, {@code PromQLApiHandler} or
     * {@code ModuleListener} holds no entry point, and matching "Processor", "Handler" and
     * "Listener" anywhere in a name had SkyWalking parse 666 of its 2,217 files up front to find 3.
     */
    private static final List<String> SEED = List.of(
            // annotations and interfaces of listener containers and frameworks
            "MessageListener",
            "KafkaListener",
            "RabbitListener",
            "SqsListener",
            "JmsListener",
            "StreamListener",
            "RocketMQ",
            "KafkaHandler",
            "RabbitHandler",
            "SqsHandler",
            "@Consume(",
            "SqsTemplate",
            "NotificationMessageMapping",
            "EventHandler",
            "CommandHandler",
            "HandlersBuilder",
            "RequestHandler",
            "RequestStreamHandler",
            "lambda.runtime.events.",
            // a handler taking its event as a Map imports no event type, only the runtime's Context
            "lambda.runtime.Context",
            "MessageHandler",
            "DeliverCallback",
            "handleDelivery",
            "onMessage",
            "@Incoming",
            "JobWorker",
            "ZeebeWorker",
            "JobHandler",
            "RecordProcessor",
            "newWorker(",
            "WorkerTask",
            "client.worker.Worker",
            "ServiceActivator",
            // pulling consumers and streams the frameworks document (DocumentedEntries)
            "ConsumerTemplate",
            "PollingConsumer",
            "@Channel(",
            "@MessageMapping(",
            // client libraries' consumers and receivers
            "KafkaConsumer",
            "DefaultConsumer",
            "MockConsumer",
            "MessageReceiver",
            "KafkaReceiver",
            "createReceiver",
            "Subscriber",
            "poll(",
            "basicConsume",
            "basicGet",
            "subscribe",
            "createDispatcher",
            "ConsumerContext",
            "consumeAutoAck",
            "consumeManualAck",
            "consumeNoAck",
            "messageListener(",
            "fetch(",
            "nextMessage",
            "iterate(",
            // a broker's own record taken by a library's handler type (EntryPoints.libraryHandler)
            "ConsumerRecord",
            "rabbitmq.client.Delivery",
            "ServiceBusReceivedMessage",
            "PubsubMessage",
            "ReceivedMessage",
            // routes, flows, functions and stream topologies
            "RouteBuilder",
            "IntegrationFlow",
            "Function<",
            "KStream",
            "StreamsBuilder",
            "kafka.streams.processor.",
            "Transformer",
            "ValueMapper",
            // consumer settings, dedupe and entities
            "@Entity",
            "@Table",
            "@Document",
            "auto.commit",
            "AUTO_COMMIT",
            "max.poll",
            "MAX_POLL",
            "AcknowledgeMode",
            "DuplicateMessageDetector",
            "IdempotentConsumer",
            "IdempotentReceiver",
            "Inbox");

    /**
     * Seed names that are also common parts of a project's own names, matched as whole identifiers
     * only, each behind a plain search for its word (most files hold none of them).
     */
    private static final Map<String, Pattern> SEED_WORDS = Map.of(
            "Consumer",
            Pattern.compile("\\b(?:Bi)?Consumer\\b"),
            "Receiver",
            Pattern.compile("\\bReceiver\\b"),
            "Processor",
            Pattern.compile("\\b(?:FixedKey|Contextual)?Processor\\b"),
            "receive",
            Pattern.compile("\\breceive\\w*\\s*\\("),
            // a library's handler type named for its broker (EntryPoints.libraryHandler): KafkaRecordHandler
            "implements",
            Pattern.compile(
                    "\\bimplements\\b[^{;]*?(?:Kafka|Rabbit|Amqp|Jms|JMS|Sqs|SQS|Pulsar|Nats|Mqtt|Kinesis|ServiceBus"
                            + "|PubSub|Pubsub|EventHub)\\w*(?:Handler|Listener|Consumer|Processor|Subscriber)\\b"));

    private static final AnyOf SEED_OR_PACKAGE =
            new AnyOf(java.util.stream.Stream.concat(SEED.stream(), EntryCatalogue.get().packages().stream())
                    .toList());

    /**
     * Whether a text holds any of a fixed set of words, in one pass over the text: a {@code contains} per word read a
     * file that holds none (most files) once per word, some 250 times (a fifth of a 1,400-file scan). Each position's
     * next four characters are looked up among the words' first four; only a hit compares whole words.
     */
    static final class AnyOf {
        private static final int HEAD = 4;
        private final List<String> shortWords = new ArrayList<>();
        private final Map<Integer, List<String>> byHead = new HashMap<>();
        private final java.util.BitSet heads = new java.util.BitSet(1 << 16);

        AnyOf(List<String> words) {
            for (String w : words) {
                if (w.length() < HEAD) {
                    shortWords.add(w);
                } else {
                    int h = head(w, 0);
                    heads.set(h);
                    byHead.computeIfAbsent(h, k -> new ArrayList<>()).add(w);
                }
            }
        }

        private static int head(String text, int at) {
            int h = 0;
            for (int i = at; i < at + HEAD; i++) {
                h = h * 31 + text.charAt(i);
            }
            return h & 0xFFFF;
        }

        boolean in(String text) {
            for (String w : shortWords) {
                if (text.contains(w)) {
                    return true;
                }
            }
            for (int i = 0; i + HEAD <= text.length(); i++) {
                int h = head(text, i);
                if (heads.get(h)) {
                    for (String w : byHead.get(h)) {
                        if (text.startsWith(w, i)) {
                            return true;
                        }
                    }
                }
            }
            return false;
        }
    }

    /**
     * Whether a file holds a seed: the seed words and the catalogue's packages in one pass ({@link AnyOf}) rather than
     * one alternation of every word tried at each character, then the few whole-identifier words.
     */
    private static boolean seeded(String text) {
        if (SEED_OR_PACKAGE.in(text)) {
            return true;
        }
        for (Map.Entry<String, Pattern> w : SEED_WORDS.entrySet()) {
            if (text.contains(w.getKey()) && w.getValue().matcher(text).find()) {
                return true;
            }
        }
        // a pull settled on its client, whatever the client (EntryPoints.settledPullLoops): both calls in the file
        return (text.contains(".ack") || text.contains(".commit") || text.contains(".delete"))
                && SETTLE_CALL.matcher(text).find()
                && PULL_CALL.matcher(text).find();
    }

    private static final Pattern SETTLE_CALL =
            Pattern.compile("\\.(?:ack|acknowledge|commit)\\w*\\s*\\(|\\.delete\\w*Messages?\\w*\\s*\\(");
    private static final Pattern PULL_CALL = Pattern.compile(
            "\\.(?:poll|pull|receive|fetch|take)\\w*\\s*\\(|\\.get(?:WithoutAck|Messages?|Batch|Records|Events)(?:WithoutAck)?\\s*\\(");

    /**
     * The simple names of the annotations written on the annotation type declared at {@code at}: those between the
     * statement before it and its {@code @interface}.
     */
    private static Set<String> annotationsBefore(String text, int at) {
        int from = Math.max(Math.max(text.lastIndexOf(';', at), 0), at - 2_000);
        Set<String> out = new HashSet<>();
        Matcher use = ANNOTATION_USE.matcher(text.substring(from, at));
        while (use.find()) {
            out.add(use.group(1));
        }
        return out;
    }

    private static final Pattern ANNOTATION_USE = Pattern.compile("@(?:[\\w$]+\\.)*([A-Za-z_$][\\w$]*)");

    /** {@code @interface Name}: an annotation type the repository declares. */
    private static final Pattern ANNOTATION_TYPE = Pattern.compile("@interface\\s+([A-Za-z_$][\\w$]*)");

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

    private Boolean deadLetter;

    /**
     * Whether the repository's code or configuration gives a RabbitMQ queue a dead-letter exchange (a queue argument,
     * Spring AMQP's {@code QueueBuilder.deadLetterExchange}, a binder's {@code auto-bind-dlq}): rejected messages
     * are then kept, not dropped.
     */
    boolean mentionsDeadLetter() {
        if (deadLetter == null) {
            java.util.function.Predicate<String> says =
                    t -> DEAD_LETTER.matcher(t).find();
            deadLetter = raw.stream().anyMatch(f -> says.test(f.text()))
                    || otherFiles.stream().anyMatch(p -> {
                        try {
                            return says.test(Files.readString(p, StandardCharsets.UTF_8));
                        } catch (IOException | UncheckedIOException e) {
                            return false;
                        }
                    });
        }
        return deadLetter;
    }

    private static final Pattern DEAD_LETTER =
            Pattern.compile("(?i)dead[-_.]?letter|auto-?bind-?dlq|autoBindDlq|\\bdlx\\b|\\bdlq\\b");

    /** Every Java file of the repository, parsed or not: text searches (timeouts, settings) read these. */
    List<RawFile> rawFiles() {
        return raw;
    }

    /** The parsed sources so far (a copy: the trace may parse more while a caller iterates). */
    List<Source> sources() {
        return List.copyOf(sources);
    }

    /** Parses the files not parsed yet whose text holds one of these words (the callers of a method found late). */
    void parseHolding(List<String> words) {
        if (!words.isEmpty()) {
            parse(raw.stream()
                    .filter(f -> !parsed.contains(f.file()) && words.stream().anyMatch(f.text()::contains))
                    .toList());
        }
    }

    /**
     * Parses the files not parsed yet that extend or implement one of these types, and their own subtypes in turn
     * (read from their text): the concrete handlers below a project's own base of a listener interface.
     */
    void parseExtending(Set<String> simpleNames) {
        Set<String> todo = new HashSet<>(simpleNames);
        Set<String> done = new HashSet<>();
        for (int round = 0; round < 5 && !todo.isEmpty(); round++) {
            List<RawFile> files = new ArrayList<>();
            for (String n : todo) {
                files.addAll(extenders.getOrDefault(n, List.of()));
            }
            done.addAll(todo);
            todo = new HashSet<>();
            for (RawFile f : files) {
                for (String d : declaredIn.get(f.file())) {
                    if (!done.contains(d)) {
                        todo.add(d);
                    }
                }
            }
            parse(files);
        }
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
                        .map(Repo::dropTokens)
                        .map(cu -> new Parsed(f.file(), cu, f.text().split("\\r?\\n", -1), f.text()))
                        .orElse(null))
                .filter(Objects::nonNull)
                .toList();
        for (Parsed p : out) {
            add(new Source(p.file(), rel(root, p.file()), p.cu(), p.lines(), moduleOf(p.file()), p.text()));
        }
    }

    /**
     * Keeps each node's position and lets its tokens go: the scan reads nodes and their ranges, never
     * tokens, and a parsed file's token list (a linked object per token) was most of what a large
     * repository held on the heap, copied by every young collection while the batch was parsed.
     */
    private static CompilationUnit dropTokens(CompilationUnit cu) {
        cu.walk(n -> {
            com.github.javaparser.Range range = n.getRange().orElse(null);
            n.setTokenRange(null);
            n.setRange(range);
        });
        return cu;
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
        indexBeans(s);
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

    private static final com.github.javaparser.ast.DataKey<String> PRINTED =
            new com.github.javaparser.ast.DataKey<>() {};

    /**
     * A node as {@code toString()} prints it, printed once: the trace reads the same method, call or scope
     * again from every path and check that reaches it (a builder chain's scope is printed at each of its
     * calls), and printing was a sixth of a large repository's scan. Nodes are not changed after parsing.
     */
    static String printed(Node n) {
        if (n.containsData(PRINTED)) {
            return n.getData(PRINTED);
        }
        String s = n.toString();
        n.setData(PRINTED, s);
        return s;
    }

    /** The nearest directory above {@code file} with a build file, else the root. */
    Path moduleOf(Path file) {
        return file.getParent() == null ? root : modules.computeIfAbsent(file.getParent(), this::moduleOfDir);
    }

    /**
     * Whether code in build module {@code from} can call into module {@code to}: the same module, the root, or a
     * module its build file names (by directory or artifact id), directly or through one module it names. An
     * interface's implementation in a sibling module the caller does not depend on never runs behind its calls.
     */
    boolean sees(Path from, Path to) {
        if (from.equals(to) || to.equals(root) || from.equals(root)) {
            return true;
        }
        // Asked for every call target the trace resolves; without the two memos a repository of hundreds of
        // modules matched every build file against every module's names per call (eclipse/kapua, 5,121 files,
        // ran for minutes). Modules are all known once the sources are indexed, before any trace.
        return seen.computeIfAbsent(List.of(from, to), k -> {
            if (names(from, to)) {
                return true;
            }
            for (Path m : new LinkedHashSet<>(modules.values())) {
                if (!m.equals(from) && !m.equals(to) && names(from, m) && names(m, to)) {
                    return true;
                }
            }
            return false;
        });
    }

    private final Map<List<Path>, Boolean> seen = new java.util.concurrent.ConcurrentHashMap<>();
    private final Map<List<Path>, Boolean> named = new java.util.concurrent.ConcurrentHashMap<>();

    /** Whether {@code module}'s build file names module {@code other} (by directory or artifact id). */
    private boolean names(Path module, Path other) {
        List<Path> key = List.of(module, other);
        Boolean known = named.get(key);
        if (known == null) {
            String build = buildText(module);
            known = moduleNames(other).stream().anyMatch(n -> mentions(build, n));
            named.put(key, known);
        }
        return known;
    }

    private static boolean mentions(String build, String name) {
        return Pattern.compile("(?<![\\w.-])" + Pattern.quote(name) + "(?![\\w.-])")
                .matcher(build)
                .find();
    }

    private final Map<Path, String> buildTexts = new java.util.concurrent.ConcurrentHashMap<>();

    /** The module's build file, without its parent block (a pom names its parent, not a dependency). */
    private String buildText(Path module) {
        return buildTexts.computeIfAbsent(module, m -> {
            for (String f : List.of("pom.xml", "build.gradle", "build.gradle.kts")) {
                try {
                    return Files.readString(m.resolve(f)).replaceAll("(?s)<parent>.*?</parent>", "");
                } catch (java.io.IOException | RuntimeException e) {
                    // no such build file: try the next kind
                }
            }
            return "";
        });
    }

    /** The names a build file would use for a module: its directory name and its own artifact id. */
    private Set<String> moduleNames(Path module) {
        return moduleNames.computeIfAbsent(module, this::readModuleNames);
    }

    private final Map<Path, Set<String>> moduleNames = new java.util.concurrent.ConcurrentHashMap<>();

    private Set<String> readModuleNames(Path module) {
        Set<String> out = new LinkedHashSet<>();
        if (module.getFileName() != null) {
            out.add(module.getFileName().toString());
        }
        java.util.regex.Matcher a =
                Pattern.compile("<artifactId>\\s*([\\w.-]+)\\s*</artifactId>").matcher(buildText(module));
        if (a.find()) {
            out.add(a.group(1));
        }
        return out;
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

    /** Where a node starts, spanning to the line where {@code end} starts. */
    Location span(Node n, Node end) {
        Location from = loc(n);
        int last = end.getBegin().map(p -> p.line).orElse(from.line());
        return new Location(from.file(), from.line(), from.column(), from.snippet(), Math.max(from.line(), last));
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
     * Types with this simple name among the files whose text passes {@code mayHold} (and those parsed
     * already): a look-up that only a kind of file can answer (SQL written on mapper methods) parses
     * only that kind, not every file declaring a {@code Builder}.
     */
    List<TypeDeclaration<?>> types(String simpleName, java.util.function.Predicate<String> mayHold) {
        List<RawFile> in = declares.get(simpleName);
        if (in != null) {
            parse(in.stream().filter(f -> mayHold.test(f.text())).toList());
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
        if (beanFiles == null) {
            beanFiles = raw.stream().filter(f -> f.text().contains("@Bean")).toList();
        }
        Pattern returns = Pattern.compile("\\b" + Pattern.quote(simpleName) + "\\s+\\w+\\s*\\(");
        parse(beanFiles.stream()
                .filter(f -> f.text().contains(simpleName)
                        && returns.matcher(f.text()).find())
                .toList());
        return List.copyOf(beanMethods.getOrDefault(simpleName, List.of()));
    }

    /** The files that declare a {@code @Bean}, found once (each look-up used to search every file). */
    private List<RawFile> beanFiles;

    /**
     * {@code @Bean} methods with a body by the simple name of the type they return, indexed as each
     * file is parsed (a look-up used to walk every parsed file's methods).
     */
    private final Map<String, List<MethodDeclaration>> beanMethods = new HashMap<>();

    private void indexBeans(Source s) {
        if (!s.text().contains("@Bean")) {
            return;
        }
        for (MethodDeclaration m : s.cu().findAll(MethodDeclaration.class)) {
            if (m.isAnnotationPresent("Bean")
                    && m.getType().isClassOrInterfaceType()
                    && m.getBody().isPresent()) {
                beanMethods
                        .computeIfAbsent(m.getType().asClassOrInterfaceType().getNameAsString(), k -> new ArrayList<>())
                        .add(m);
            }
        }
    }

    /**
     * Classes of the repository that extend or implement {@code simpleName} and can matter to a call
     * of {@code method}, parsed on first use. A subtype's file is parsed only when it can declare the
     * method (its text holds {@code method(}), has subtypes of its own, or has another repository
     * supertype the method can be inherited from: a call through an interface with a hundred
     * implementations used to parse all hundred to follow the few that define the method.
     */
    private List<ClassOrInterfaceDeclaration> subtypes(String simpleName, String method) {
        List<RawFile> in = extenders.get(simpleName);
        if (in != null) {
            Pattern declares = Pattern.compile("\\b" + Pattern.quote(method) + "\\s*\\(");
            parse(in.stream()
                    .filter(f -> parsed.contains(f.file())
                            || (f.text().contains(method)
                                    && declares.matcher(f.text()).find())
                            || declaredIn.get(f.file()).stream().anyMatch(extenders::containsKey)
                            || supersOf.get(f.file()).stream().anyMatch(st -> !st.equals(simpleName) && declares_(st)))
                    .toList());
        }
        return subtypes.getOrDefault(simpleName, List.of());
    }

    /** True when a file of the repository extends or implements a type of this simple name (read from its text). */
    boolean isExtended(String simpleName) {
        return extenders.containsKey(simpleName);
    }

    private boolean declares_(String simpleName) {
        return declares.containsKey(simpleName);
    }

    /** The simple names each file declares, and the names in its extends and implements clauses (read from its text). */
    private final Map<Path, Set<String>> declaredIn = new HashMap<>();

    private final Map<Path, Set<String>> supersOf = new HashMap<>();

    /**
     * The declarations a simple name means where {@code from} is written, as javac would read it:
     * the single-type import, then the same package, then an on-demand import, then the same module
     * (build file). Two services with a {@code ReviewRepository} each never resolve to each other's.
     * All of them when none of these narrows it down (a name the file does not import at all). When a
     * step leaves copies of one qualified name from several build modules (a course's or a versioned
     * repository's copied services), the copy in the referring file's module is the one javac sees.
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
                        .filter(t -> qualifiedName(t).equals(imp.getNameAsString()))
                        .toList();
                if (!hit.isEmpty()) {
                    return inModuleOf(hit, src);
                }
            }
        }
        List<TypeDeclaration<?>> samePackage =
                all.stream().filter(t -> packageOf(t).equals(pkg)).toList();
        if (!samePackage.isEmpty()) {
            return inModuleOf(samePackage, src);
        }
        for (com.github.javaparser.ast.ImportDeclaration imp : src.cu().getImports()) {
            if (!imp.isStatic() && imp.isAsterisk()) {
                List<TypeDeclaration<?>> hit = all.stream()
                        .filter(t -> packageOf(t).equals(imp.getNameAsString()))
                        .toList();
                if (!hit.isEmpty()) {
                    return inModuleOf(hit, src);
                }
            }
        }
        return inModuleOf(all, src);
    }

    /** Those of {@code types} declared in {@code src}'s build module, or all of them when none is. */
    private List<TypeDeclaration<?>> inModuleOf(List<TypeDeclaration<?>> types, Source src) {
        if (types.size() <= 1) {
            return types;
        }
        List<TypeDeclaration<?>> sameModule = types.stream()
                .filter(t -> {
                    Source ts = sourceOf(t);
                    return ts != null && ts.module().equals(src.module());
                })
                .toList();
        return sameModule.isEmpty() ? types : sameModule;
    }

    private String packageOf(TypeDeclaration<?> t) {
        return packages.computeIfAbsent(
                t,
                x -> x.findCompilationUnit()
                        .flatMap(cu -> cu.getPackageDeclaration())
                        .map(pd -> pd.getNameAsString())
                        .orElse(""));
    }

    private String qualifiedName(TypeDeclaration<?> t) {
        return qualifiedNames.computeIfAbsent(t, x -> x.getFullyQualifiedName().orElse(""));
    }

    /** Each type's package and qualified name, computed once (resolution asks for them on every call it follows). */
    private final Map<TypeDeclaration<?>, String> packages = new java.util.IdentityHashMap<>();

    private final Map<TypeDeclaration<?>, String> qualifiedNames = new java.util.IdentityHashMap<>();

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
            // a copy: following one subtype may parse files that add others of this name to the live list
            for (ClassOrInterfaceDeclaration sub : List.copyOf(subtypes(typeName, name))) {
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
