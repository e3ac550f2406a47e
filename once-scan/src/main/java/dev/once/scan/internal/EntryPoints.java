package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.NodeList;
import com.github.javaparser.ast.body.ClassOrInterfaceDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.RecordDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.AnnotationExpr;
import com.github.javaparser.ast.expr.BooleanLiteralExpr;
import com.github.javaparser.ast.expr.CastExpr;
import com.github.javaparser.ast.expr.EnclosedExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.LambdaExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.MethodReferenceExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.ObjectCreationExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import com.github.javaparser.ast.stmt.DoStmt;
import com.github.javaparser.ast.stmt.ForEachStmt;
import com.github.javaparser.ast.stmt.ForStmt;
import com.github.javaparser.ast.stmt.ReturnStmt;
import com.github.javaparser.ast.stmt.Statement;
import com.github.javaparser.ast.stmt.WhileStmt;
import com.github.javaparser.ast.type.ClassOrInterfaceType;
import dev.once.scan.Location;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Finds the message entry points of a repository and how each acknowledges. */
final class EntryPoints {

    static final Pattern CAMEL_BROKER = Pattern.compile(
            "^(kafka|vertx-kafka|aws2-sqs|aws-sqs|sqs|rabbitmq|spring-rabbitmq|amqp|jms|activemq|activemq6|sjms2?|nats|paho"
                    + "|paho-mqtt5|mqtt|google-pubsub|google-pubsub-lite|pulsar|azure-servicebus|azure-storage-queue"
                    + "|azure-eventhubs|aws2-kinesis|aws-kinesis|aws2-ddbstream|stomp|ironmq):.*"
                    // a Kamelet source reading a broker (kamelet:kafka-source, kamelet:aws-sqs-source)
                    + "|^kamelet:[\\w-]*(kafka|sqs|rabbitmq|amqp|jms|pubsub|nats|mqtt|pulsar|servicebus|eventhubs|kinesis)"
                    + "[\\w-]*-source\\b.*");
    private static final Set<String> KAFKA_CONSUMER_TYPES = Set.of("KafkaConsumer", "Consumer", "MockConsumer");
    /** A share group's consumer (KIP-932, Kafka queues): records are acquired under a lock, not by offset. */
    private static final Set<String> KAFKA_SHARE_CONSUMER_TYPES =
            Set.of("ShareConsumer", "KafkaShareConsumer", "MockShareConsumer");
    /**
     * A library's or the project's own SQS wrapper whose type says so (SqsQueueService, SqsClientWrapper): its
     * receiveMessage(s) pulls from SQS like the SDK's, and the trace meets the SDK's deleteMessage under it.
     */
    private static final Pattern SQS_WRAPPER = Pattern.compile("\\w*(Sqs|SQS)\\w*");

    private static final Set<String> SQS_TYPES = Set.of(
            "SqsClient", "SqsAsyncClient", "AmazonSQS", "AmazonSQSClient", "AmazonSQSAsync", "AmazonSQSExtendedClient");

    /**
     * The listener annotations the finders below read (the catalogue's are added by {@link #listenerAnnotation}): a
     * project's own annotation declared over one of them is that listener ({@link #withMeta}).
     */
    private static final Set<String> LISTENER_ANNOTATIONS = Set.of(
            "KafkaListener",
            "KafkaListeners",
            "KafkaHandler",
            "DltHandler",
            "RabbitListener",
            "RabbitListeners",
            "RabbitHandler",
            "JmsListener",
            "JmsListeners",
            "SqsListener",
            "SqsHandler",
            "StreamListener",
            "NotificationMessageMapping",
            "EventHandler",
            "SagaEventHandler",
            "JobWorker",
            "ZeebeWorker",
            "WorkerTask",
            "Incoming",
            "EventuateCommandHandler",
            "EventuateDomainEventHandler",
            "ServiceActivator");

    /** A listener annotation of a finder or of the catalogue, by its simple name. */
    static boolean listenerAnnotation(String simpleName) {
        return LISTENER_ANNOTATIONS.contains(simpleName)
                || CATALOGUE.names(EntryCatalogue.Shape.ANNOTATION, simpleName);
    }

    private final Repo repo;
    private final Types types;
    private final Settings settings;
    /** The annotations on each annotation type the repository declares, by its simple name. */
    private final Map<String, List<AnnotationExpr>> metaAnnotations = new HashMap<>();

    private final List<Entry> entries = new ArrayList<>();
    private final Map<Node, Entry> byBody = new IdentityHashMap<>();
    private final Map<Path, Location> noopDetector = new HashMap<>();
    private final Map<Path, Boolean> streamModules = new HashMap<>();
    private final Map<Path, Boolean> integrationInbound = new HashMap<>();
    private final Map<Path, Boolean> pubSubInbound = new HashMap<>();

    EntryPoints(Repo repo, Types types, Settings settings) {
        this.repo = repo;
        this.types = types;
        this.settings = settings;
    }

    /**
     * Camel components of a broker family, by the type or factory that makes them: {@code JmsComponent},
     * {@code ActiveMQComponent.activeMQComponent(…)}, {@code AMQPComponent}, {@code SjmsComponent}, and the Spring XML
     * {@code class="org.apache.camel.component.jms.JmsComponent"}.
     */
    private static final String CAMEL_BROKER_COMPONENT = "(?:Jms|ActiveMQ|Activemq|AMQP|Amqp|Sjms2?|Kafka|RabbitMQ"
            + "|SpringRabbitMQ|Sqs2?|Paho|PahoMqtt5|Nats|GooglePubsub|Pulsar|Stomp|ServiceBus|IronMQ)Component";

    /** {@code @Named("ibmmq")} / {@code @Identifier("amq")} / {@code @Bean("wmq")} on a method making such a component. */
    private static final Pattern NAMED_COMPONENT = Pattern.compile("@(?:Named|Identifier|Bean|Component)\\(\\s*"
            + "(?:(?:name|value)\\s*=\\s*)?\\{?\\s*\"([\\w-]+)\"[^)]*\\)[^;{=]{0,200}?\\b\\w*"
            + CAMEL_BROKER_COMPONENT + "\\s+\\w+\\s*\\(");

    /**
     * {@code @Bean(BROKER)} / {@code @Named(JMS_NAME)} on a method making such a component, the name a constant
     * ({@code protected static final String BROKER = "broker"}) whose value {@link #STRING_CONSTANT} finds.
     */
    private static final Pattern CONSTANT_NAMED_COMPONENT =
            Pattern.compile("@(?:Named|Identifier|Bean|Component)\\(\\s*"
                    + "(?:(?:name|value)\\s*=\\s*)?\\{?\\s*(?:\\w+\\.)?([A-Z][A-Z0-9_]*)\\s*\\}?\\s*\\)[^;{=]{0,200}?\\b\\w*"
                    + CAMEL_BROKER_COMPONENT + "\\s+\\w+\\s*\\(");

    /** A string constant's declaration: {@code static final String BROKER = "broker";}. */
    private static final String STRING_CONSTANT = "\\bstatic\\s+final\\s+String\\s+%s\\s*=\\s*\"([\\w-]+)\"\\s*;";

    /** {@code @Bean public JmsComponent wmq(…)}: an unnamed bean method's bean is named for the method. */
    private static final Pattern BEAN_METHOD_COMPONENT = Pattern.compile(
            "@Bean\\b(?!\\s*\\()[^;{=]{0,120}?\\b\\w*" + CAMEL_BROKER_COMPONENT + "\\s+([\\w]+)\\s*\\(");

    /** {@code context.addComponent("amq", JmsComponent.jmsComponentAutoAcknowledge(cf))}, the component made in place. */
    private static final Pattern ADDED_COMPONENT =
            Pattern.compile("addComponent\\(\\s*\"([\\w-]+)\"\\s*,[^;]*?(?:\\b\\w*" + CAMEL_BROKER_COMPONENT
                    + "\\b|\\b(?:jms|activeMQ|amqp|sjms)Component\\w*\\()");

    /** {@code <bean id="wmq" class="org.apache.camel.component.jms.JmsComponent">} in a Spring XML file. */
    private static final Pattern XML_COMPONENT = Pattern.compile("<bean\\b[^>]*?\\bid\\s*=\\s*\"([\\w-]+)\"[^>]*?"
            + "\\bclass\\s*=\\s*\"org\\.apache\\.(?:camel\\.component|activemq\\.camel\\.component)\\.[\\w.]*?"
            + CAMEL_BROKER_COMPONENT + "\"|<bean\\b[^>]*?\\bclass\\s*=\\s*\"org\\.apache\\.(?:camel\\.component"
            + "|activemq\\.camel\\.component)\\.[\\w.]*?" + CAMEL_BROKER_COMPONENT
            + "\"[^>]*?\\bid\\s*=\\s*\"([\\w-]+)\"");

    /**
     * The names the repository registers broker components under ({@code from("ibmmq:queue:…")} reads IBM MQ through a
     * {@code JmsComponent} a producer method names "ibmmq"): a route from one of them reads a broker as
     * {@code jms:} does. Read from the text of every Java and XML file, once.
     */
    private Set<String> camelComponents;

    private Set<String> camelComponents() {
        if (camelComponents == null) {
            Set<String> names = new java.util.HashSet<>();
            Set<String> constants = new java.util.HashSet<>();
            for (Repo.RawFile f : repo.rawFiles()) {
                String text = f.text();
                if (text.contains("org.apache.camel") && text.contains("Component")) {
                    for (Pattern p : List.of(NAMED_COMPONENT, BEAN_METHOD_COMPONENT, ADDED_COMPONENT)) {
                        p.matcher(text).results().forEach(r -> names.add(r.group(1)));
                    }
                    CONSTANT_NAMED_COMPONENT.matcher(text).results().forEach(r -> constants.add(r.group(1)));
                }
            }
            // a component named by a constant: the constant's value, wherever the repository declares it (a base
            // class of the configuration, a constants class)
            for (String constant : constants) {
                Pattern declared = Pattern.compile(String.format(STRING_CONSTANT, Pattern.quote(constant)));
                for (Repo.RawFile f : repo.rawFiles()) {
                    if (f.text().contains(constant)) {
                        declared.matcher(f.text()).results().forEach(r -> names.add(r.group(1)));
                    }
                }
            }
            for (Path f : repo.otherFiles) {
                if (f.getFileName().toString().endsWith(".xml")) {
                    try {
                        String text = java.nio.file.Files.readString(f);
                        if (text.contains("org.apache.") && text.contains("Component")) {
                            XML_COMPONENT
                                    .matcher(text)
                                    .results()
                                    .forEach(r -> names.add(r.group(1) != null ? r.group(1) : r.group(2)));
                        }
                    } catch (java.io.IOException | RuntimeException e) {
                        // unreadable: no component names from it
                    }
                }
            }
            camelComponents = Set.copyOf(names);
        }
        return camelComponents;
    }

    /**
     * The JMS family's destination form, {@code <component>:queue:<name>} or {@code :topic:}: only a JMS-style
     * component (jms, activemq, amqp, sjms, and any the application or a shared library registers under a name of
     * its own, as ReCAP's "scsbactivemq") addresses a broker destination this way, so the form names a broker even
     * where the component's registration is not in the repository.
     */
    private static final Pattern CAMEL_JMS_DESTINATION =
            Pattern.compile("^[a-z][\\w-]*:(?:queue|topic|temp-queue|temp-topic):[^:?].*", Pattern.CASE_INSENSITIVE);

    /**
     * A Camel endpoint URI that reads a broker: a broker component's scheme, a name the repository gave one, or the
     * JMS destination form.
     */
    boolean camelBroker(String uri) {
        if (CAMEL_BROKER.matcher(uri).matches()
                || CAMEL_JMS_DESTINATION.matcher(uri).matches()) {
            return true;
        }
        int colon = uri.indexOf(':');
        return colon > 0 && camelComponents().contains(uri.substring(0, colon));
    }

    List<Entry> find() {
        listenerParameters();
        for (Repo.Source s : repo.sources()) {
            for (com.github.javaparser.ast.body.AnnotationDeclaration a :
                    s.cu().findAll(com.github.javaparser.ast.body.AnnotationDeclaration.class)) {
                if (!a.getAnnotations().isEmpty()) {
                    metaAnnotations.putIfAbsent(a.getNameAsString(), a.getAnnotations());
                }
            }
        }
        for (Repo.Source s : repo.sources()) {
            for (com.github.javaparser.ast.ImportDeclaration imp : s.cu().getImports()) {
                if (imp.getNameAsString().contains("NoopDuplicateMessageDetector")) {
                    noopDetector.putIfAbsent(s.module(), repo.loc(imp));
                }
            }
            String text = s.text();
            if (text.contains("org.springframework.cloud.stream") || text.contains("spring.cloud.function")) {
                streamModules.put(s.module(), true);
            }
            if (text.contains("messageDrivenChannelAdapter")
                    || text.contains("MessageDrivenChannelAdapter")
                    || text.contains("Amqp.inboundAdapter")
                    || text.contains("InboundChannelAdapter")
                    // the JMS endpoints built as beans (Spring Integration's JMS chapter): a container bean and a
                    // ChannelPublishingJmsMessageListener in a JmsMessageDrivenEndpoint, or a polled destination
                    || text.contains("JmsMessageDrivenEndpoint")
                    || text.contains("ChannelPublishingJmsMessageListener")
                    || text.contains("JmsDestinationPollingSource")) {
                integrationInbound.put(s.module(), true);
            }
            if (text.contains("PubSubInboundChannelAdapter")) {
                pubSubInbound.put(s.module(), true);
            }
        }
        for (Path f : repo.otherFiles) {
            String n = f.getFileName().toString();
            if (n.endsWith(".xml") && !n.equals("pom.xml")) {
                xmlListenerFiles(f);
            }
            if (n.equals("pom.xml") || n.startsWith("build.gradle")) {
                try {
                    String build = java.nio.file.Files.readString(f);
                    if (build.contains("spring-cloud-stream") || build.contains("spring-cloud-starter-stream")) {
                        streamModules.put(f.getParent(), true);
                    }
                } catch (java.io.IOException | RuntimeException e) {
                    // unreadable build file: no stream detection from it
                }
            }
        }
        // the classes below a project's own base of a listener interface or route builder are handlers too, though
        // their files may hold no word the parse is seeded with
        Set<String> bases = new java.util.HashSet<>();
        for (Repo.Source s : repo.sources()) {
            for (ClassOrInterfaceDeclaration c : s.cu().findAll(ClassOrInterfaceDeclaration.class)) {
                if (java.util.stream.Stream.concat(c.getImplementedTypes().stream(), c.getExtendedTypes().stream())
                        .anyMatch(t -> handlerSupertype(t.getNameAsString()))) {
                    bases.add(c.getNameAsString());
                }
            }
        }
        repo.parseExtending(bases);
        DocumentedEntries documented = new DocumentedEntries(this, repo, types, settings);
        for (Repo.Source s : repo.sources()) {
            for (ClassOrInterfaceDeclaration c : s.cu().findAll(ClassOrInterfaceDeclaration.class)) {
                documented.type(s, c);
                annotated(s, c.getAnnotations(), c.getMethods());
                implemented(s, c, c.getImplementedTypes(), c.getExtendedTypes());
                catalogued(s, c);
                if (!c.isInterface() && !c.isAbstract()) {
                    List<ClassOrInterfaceType> implemented = new ArrayList<>();
                    List<ClassOrInterfaceType> extended = new ArrayList<>();
                    inheritedLibraryTypes(c, Map.of(), implemented, extended, new java.util.HashSet<>(), 0);
                    if (!implemented.isEmpty() || !extended.isEmpty()) {
                        implemented(s, c, new NodeList<>(implemented), new NodeList<>(extended));
                        List<String> names = new ArrayList<>();
                        implemented.forEach(t -> names.add(t.getNameAsString()));
                        extended.forEach(t -> names.add(t.getNameAsString()));
                        catalogueImplemented(s, c, names);
                    }
                }
                streamComponent(s, c);
                camel(s, c);
                libraryHandler(s, c);
            }
            // a listener written as a record (zipkin's Pulsar listener) implements its interface just the same
            for (RecordDeclaration r : s.cu().findAll(RecordDeclaration.class)) {
                implemented(s, r, r.getImplementedTypes(), new NodeList<>());
            }
            for (MethodCallExpr call : s.cu().findAll(MethodCallExpr.class)) {
                calls(s, call);
                documented.call(s, call);
            }
            for (ObjectCreationExpr oc : s.cu().findAll(ObjectCreationExpr.class)) {
                oc.getAnonymousClassBody()
                        .ifPresent(members -> annotated(
                                s,
                                new NodeList<>(),
                                members.stream()
                                        .filter(MethodDeclaration.class::isInstance)
                                        .map(MethodDeclaration.class::cast)
                                        .toList()));
                created(s, oc);
            }
            for (VariableDeclarator v : s.cu().findAll(VariableDeclarator.class)) {
                pubSubReceiver(s, v);
                catalogueVariable(s, v);
            }
            // asked once per file, not once per method: a file of a few hundred methods was read whole for each
            boolean eventuateHandlers = s.text().contains("HandlersBuilder");
            for (MethodDeclaration m : s.cu().findAll(MethodDeclaration.class)) {
                if (eventuateHandlers) {
                    eventuate(s, m);
                }
                stream(s, m);
                lambdaMethod(s, m);
                callbackBean(s, m);
            }
        }
        for (Repo.Source s : repo.sources()) {
            for (MethodReferenceExpr ref : s.cu().findAll(MethodReferenceExpr.class)) {
                libraryCallback(s, ref);
            }
        }
        forwardedHandlers();
        inheritedConsumers();
        delegatedHandlers();
        uncalledRecordHandlers();
        recordPullLoops();
        settledPullLoops();
        failedRecordCommits();
        for (Path f : repo.otherFiles) {
            camelRouteFile(f);
        }
        xmlListeners();
        return entries;
    }

    /** The Spring XML files that configure a listener container or an inbound adapter, with their text. */
    private final Map<Path, String> listenerXml = new java.util.LinkedHashMap<>();

    /**
     * Spring's XML namespaces for listener containers ({@code <jms:listener-container>}, {@code
     * <rabbit:listener-container>}) and for Spring Integration's inbound adapters from a broker
     * ({@code <int-jms:message-driven-channel-adapter>}, {@code <int-amqp:inbound-channel-adapter>}, Kafka, MQTT, SQS):
     * the file is read once here; a module whose XML feeds a channel from a broker has its {@code @ServiceActivator}s
     * read as consumers, as one configured in Java has.
     */
    private void xmlListenerFiles(Path f) {
        String text;
        try {
            if (java.nio.file.Files.size(f) > 2_000_000) {
                return;
            }
            text = java.nio.file.Files.readString(f);
        } catch (java.io.IOException | RuntimeException e) {
            return; // unreadable: no listeners from it
        }
        if (!text.contains("listener-container") && !text.contains("channel-adapter")) {
            return;
        }
        listenerXml.put(f, text);
        Matcher m = XML_ADAPTER.matcher(text);
        while (m.find()) {
            if (xmlBroker(text, m.group(1), m.group(2)) != null) {
                integrationInbound.put(repo.moduleOf(f), true);
            }
        }
    }

    /** {@code <prefix:listener-container …>…</prefix:listener-container>}. */
    private static final Pattern XML_CONTAINER =
            Pattern.compile("<([\\w-]+):listener-container\\b([^>]*)>(.*?)</\\1:listener-container>", Pattern.DOTALL);

    /** {@code <prefix:listener …/>} inside a container. */
    private static final Pattern XML_LISTENER = Pattern.compile("<([\\w-]+):listener\\b([^>]*)/?>", Pattern.DOTALL);

    /** A Spring Integration inbound adapter: {@code <int-jms:message-driven-channel-adapter … channel="in"/>}. */
    private static final Pattern XML_ADAPTER = Pattern.compile(
            "<([\\w-]+):((?:\\w+-)*(?:message-driven-channel-adapter|inbound-channel-adapter))\\b([^>]*)>",
            Pattern.DOTALL);

    /** {@code <int:service-activator input-channel="in" ref="bean" method="m"/>}, or one inside a chain. */
    private static final Pattern XML_ACTIVATOR =
            Pattern.compile("<([\\w-]+):service-activator\\b([^>]*)>", Pattern.DOTALL);

    private static final Pattern XML_CHAIN =
            Pattern.compile("<([\\w-]+):chain\\b([^>]*)>(.*?)</\\1:chain>", Pattern.DOTALL);

    /** {@code <bean id="orderService" class="acme.OrderService">}. */
    private static final Pattern XML_BEAN = Pattern.compile("<bean\\b([^>]*)>", Pattern.DOTALL);

    private static String attr(String attrs, String name) {
        Matcher m = Pattern.compile("(?:^|\\s)" + Pattern.quote(name) + "\\s*=\\s*\"([^\"]*)\"")
                .matcher(attrs);
        return m.find() ? m.group(1).strip() : null;
    }

    /**
     * The broker an XML element's namespace prefix stands for, from the file's {@code xmlns:prefix="…"} (Spring's
     * schema locations): JMS, Rabbit/AMQP, Kafka, MQTT, SQS; null for any other (a file or JDBC adapter, a channel).
     */
    private static String xmlBroker(String text, String prefix, String element) {
        Matcher ns = Pattern.compile("xmlns:" + Pattern.quote(prefix) + "\\s*=\\s*\"([^\"]+)\"")
                .matcher(text);
        String uri = ns.find() ? ns.group(1) : prefix;
        if (element != null && element.startsWith("sqs-")) {
            return "sqs";
        }
        if (uri.endsWith("/jms") || uri.endsWith("/integration/jms")) {
            return "jms";
        }
        if (uri.endsWith("/rabbit") || uri.endsWith("/integration/amqp")) {
            return "rabbitmq";
        }
        if (uri.endsWith("/integration/kafka")) {
            return "kafka";
        }
        if (uri.endsWith("/integration/mqtt")) {
            return "mqtt";
        }
        if (uri.contains("/integration/aws") || uri.contains("cloud/aws")) {
            return "sqs";
        }
        return null;
    }

    private static int lineAt(String text, int at) {
        int line = 1;
        for (int i = 0; i < at && i < text.length(); i++) {
            if (text.charAt(i) == '\n') {
                line++;
            }
        }
        return line;
    }

    /**
     * Listeners configured in Spring XML: a {@code <jms:listener ref="orderService" method="placeOrder"/>} or
     * {@code <rabbit:listener ref=… method=…/>} in a listener container, and a {@code <int:service-activator ref=…
     * method=…/>} on the channel a broker's inbound adapter feeds (directly or as the first step of a chain). The
     * bean is followed to its class ({@code <bean id=… class=…>} in any of the repository's XML, else the class the
     * id names as Spring names a component) and the entry is the Java method, traced as any listener is. A JMS
     * container acknowledges as its {@code acknowledge} attribute says: {@code auto} (the default) acknowledges before
     * the listener runs (a DefaultMessageListenerContainer), {@code transacted}, {@code client} or a transaction
     * manager after it returns; a Rabbit container with {@code acknowledge="none"} acknowledges on delivery.
     */
    private void xmlListeners() {
        if (listenerXml.isEmpty()) {
            return;
        }
        Map<String, String> beanClasses = new HashMap<>();
        for (String text : listenerXml.values()) {
            Matcher b = XML_BEAN.matcher(text);
            while (b.find()) {
                String id = attr(b.group(1), "id");
                String cls = attr(b.group(1), "class");
                if (id != null && cls != null) {
                    beanClasses.putIfAbsent(id, cls);
                }
            }
        }
        for (var file : listenerXml.entrySet()) {
            String text = file.getValue();
            Matcher c = XML_CONTAINER.matcher(text);
            while (c.find()) {
                String broker = xmlBroker(text, c.group(1), null);
                if (broker == null || broker.equals("kafka") || broker.equals("mqtt") || broker.equals("sqs")) {
                    continue;
                }
                String container = c.group(2);
                String mode = java.util.Objects.requireNonNullElse(attr(container, "acknowledge"), "auto");
                boolean transacted = attr(container, "transaction-manager") != null;
                Matcher l = XML_LISTENER.matcher(c.group(3));
                while (l.find()) {
                    String ref = attr(l.group(2), "ref");
                    if (ref == null) {
                        continue;
                    }
                    String method = attr(l.group(2), "method");
                    String from = java.util.stream.Stream.of("destination", "queue-names", "queues")
                            .map(n -> attr(l.group(2), n))
                            .filter(java.util.Objects::nonNull)
                            .findFirst()
                            .orElse("");
                    for (Entry e :
                            xmlBeanMethods(beanClasses, ref, method, "<" + l.group(1) + ":listener> " + from, broker)) {
                        int line = lineAt(text, c.start(3) + l.start());
                        e.ackSetting = repo.loc(file.getKey(), line, text.split("\n", -1)[line - 1].strip());
                        if (broker.equals("jms") && !transacted && (mode.equals("auto") || mode.equals("dups-ok"))) {
                            e.ack = Entry.Ack.AUTO;
                            e.ackText = "its XML <" + c.group(1) + ":listener-container> (acknowledge=\"" + mode
                                    + "\", no transaction manager) runs a DefaultMessageListenerContainer, which in"
                                    + " AUTO_ACKNOWLEDGE mode acknowledges the message before the listener runs: a"
                                    + " listener that throws or crashes does not get it again";
                        } else if (broker.equals("rabbitmq") && mode.equals("none")) {
                            e.ack = Entry.Ack.AUTO;
                            e.ackText = "its XML <" + c.group(1) + ":listener-container acknowledge=\"none\"> takes"
                                    + " each message with autoAck: it is acknowledged on delivery";
                        } else {
                            e.ackText = "the XML listener container acknowledges after the listener returns";
                        }
                    }
                }
            }
            Set<String> inbound = new java.util.HashSet<>();
            Map<String, String> inboundBroker = new HashMap<>();
            Matcher a = XML_ADAPTER.matcher(text);
            while (a.find()) {
                String broker = xmlBroker(text, a.group(1), a.group(2));
                String channel = attr(a.group(3), "channel");
                if (broker != null && channel != null) {
                    inbound.add(channel);
                    inboundBroker.put(channel, broker);
                }
            }
            if (inbound.isEmpty()) {
                continue;
            }
            List<String[]> activators = new ArrayList<>(); // input channel, ref, method
            Matcher sa = XML_ACTIVATOR.matcher(text);
            while (sa.find()) {
                activators.add(new String[] {
                    attr(sa.group(2), "input-channel"), attr(sa.group(2), "ref"), attr(sa.group(2), "method")
                });
            }
            Matcher ch = XML_CHAIN.matcher(text);
            while (ch.find()) {
                Matcher first = XML_ACTIVATOR.matcher(ch.group(3));
                if (first.find()) {
                    activators.add(new String[] {
                        attr(ch.group(2), "input-channel"), attr(first.group(2), "ref"), attr(first.group(2), "method")
                    });
                }
            }
            for (String[] act : activators) {
                if (act[0] == null || act[1] == null || !inbound.contains(act[0])) {
                    continue;
                }
                for (Entry e : xmlBeanMethods(
                        beanClasses, act[1], act[2], "<service-activator> on " + act[0], inboundBroker.get(act[0]))) {
                    e.ackText = "the XML inbound adapter acknowledges after the flow returns";
                }
            }
        }
    }

    /** The entries for the method {@code method} (or the listener's default) of the class bean {@code ref} names. */
    private List<Entry> xmlBeanMethods(
            Map<String, String> beanClasses, String ref, String method, String via, String broker) {
        String cls = beanClasses.get(ref);
        String simple = cls != null
                ? cls.substring(cls.lastIndexOf('.') + 1).replace('$', '.')
                : Character.toUpperCase(ref.charAt(0)) + ref.substring(1);
        if (simple.contains(".")) {
            simple = simple.substring(simple.lastIndexOf('.') + 1);
        }
        String pkg = cls != null && cls.contains(".") ? cls.substring(0, cls.lastIndexOf('.')) : null;
        List<Entry> out = new ArrayList<>();
        for (TypeDeclaration<?> td : repo.types(simple)) {
            Repo.Source src = repo.sourceOf(td);
            if (src == null
                    || (pkg != null
                            && src.cu()
                                    .getPackageDeclaration()
                                    .map(p -> !pkg.startsWith(p.getNameAsString()))
                                    .orElse(false))) {
                continue;
            }
            String name = method;
            if (name == null) {
                // no method: a MessageListener's onMessage, else MessageListenerAdapter's default handleMessage
                name = td.getMethodsByName("onMessage").isEmpty() ? "handleMessage" : "onMessage";
            }
            for (MethodDeclaration m : td.getMethodsByName(name)) {
                if (m.getBody().isEmpty()) {
                    continue;
                }
                Entry e = add(
                        src,
                        "Spring XML " + via + " → " + simple + "." + name,
                        broker,
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.source = src;
                out.add(e);
            }
        }
        return out;
    }

    /** {@code <from uri="kafka:…"/>} in a Spring, Blueprint or XML-DSL route (the attribute may sit lines below). */
    private static final Pattern XML_FROM =
            Pattern.compile("<from\\b[^>]*?\\buri\\s*=\\s*\"([^\"]+)\"", Pattern.DOTALL);

    /** {@code from: uri: "kafka:…"} (or {@code from: "kafka:…"}) in a YAML-DSL route. */
    private static final Pattern YAML_FROM = Pattern.compile(
            "(?m)^[ \\t]*-?[ \\t]*from:[ \\t]*(?:\\r?\\n[ \\t]*uri:[ \\t]*)?[\"']?([a-z0-9-]+:[^\"'\\s]*)");

    /**
     * Camel routes written in XML (Spring or Blueprint {@code <camelContext>}, the XML DSL's {@code <routes>}) or in
     * the YAML DSL, from a broker: an entry point at its {@code from}, acknowledged as a route written in Java is.
     * Their steps are not Java, so nothing is traced behind them.
     */
    private void camelRouteFile(Path f) {
        String n = f.getFileName().toString();
        boolean xml = n.endsWith(".xml");
        if (!xml && !n.endsWith(".yaml") && !n.endsWith(".yml")) {
            return;
        }
        String text;
        try {
            text = java.nio.file.Files.readString(f);
        } catch (java.io.IOException | RuntimeException e) {
            return; // unreadable: no routes from it
        }
        if (xml ? !text.contains("camel.apache.org/schema") && !text.contains("<routes") : !text.contains("from:")) {
            return;
        }
        Matcher m = (xml ? XML_FROM : YAML_FROM).matcher(text);
        String[] lines = text.split("\n", -1);
        while (m.find()) {
            String uri = m.group(1).strip();
            if (!camelBroker(uri)) {
                continue;
            }
            int at = xml ? m.start() : m.start() + m.group().indexOf("from:");
            int line = 1;
            for (int i = 0; i < at; i++) {
                if (text.charAt(i) == '\n') {
                    line++;
                }
            }
            com.github.javaparser.ast.stmt.BlockStmt none = new com.github.javaparser.ast.stmt.BlockStmt();
            Entry e = new Entry();
            e.kind = "Camel route from(" + uri.split("[:?]")[0] + ":…)";
            e.broker = "camel";
            e.name = n + " route @" + line;
            e.decl = none;
            e.body = none;
            e.location = repo.loc(f, line, line - 1 < lines.length ? lines[line - 1] : "");
            e.ackText = "the Camel consumer acknowledges after the route completes (its steps are "
                    + (xml ? "XML" : "YAML") + ", not traced)";
            entries.add(e);
        }
    }

    /**
     * The repository's own abstract consumer: a loop or handler written in an abstract class whose work is a
     * method the class leaves to its subclasses ({@code KafkaListener.run} polls and calls the abstract
     * {@code consume}) runs once per concrete subclass, each a consumer of its own with its own settings (what
     * it passes to {@code super(…)}). Each becomes an entry at its override, traced through the inherited loop
     * with calls on {@code this} dispatched to that class; the abstract one is dropped.
     */
    private void inheritedConsumers() {
        for (Entry e : List.copyOf(entries)) {
            if (!(Types.enclosingType(e.body) instanceof ClassOrInterfaceDeclaration c)
                    || c.isInterface()
                    || !c.isAbstract()
                    || e.self != null) {
                continue;
            }
            List<Entry> derived = new ArrayList<>();
            // the loop's calls on this, and those of the class's own methods it calls (a task handed to a pool
            // calling process(m), which calls the abstract handle(m)), a few methods deep
            List<Node> reach = new ArrayList<>(List.of(e.body));
            Set<MethodDeclaration> seen = new java.util.HashSet<>();
            for (int i = 0; i < reach.size() && i < 8; i++) {
                for (MethodCallExpr call : reach.get(i).findAll(MethodCallExpr.class, EntryPoints::onThis)) {
                    for (MethodDeclaration own : c.getMethodsByName(call.getNameAsString())) {
                        if (own.getParameters().size() == call.getArguments().size()
                                && own.getBody().isPresent()
                                && seen.add(own)) {
                            reach.add(own.getBody().get());
                        }
                    }
                }
            }
            List<MethodCallExpr> selfCalls = new ArrayList<>();
            reach.forEach(r -> selfCalls.addAll(r.findAll(MethodCallExpr.class, EntryPoints::onThis)));
            for (MethodCallExpr call : selfCalls) {
                List<MethodDeclaration> ms = repo.methods(
                        c.getNameAsString(),
                        call.getNameAsString(),
                        call.getArguments().size(),
                        c);
                // left to the subclasses: no body in the class or above it
                if (ms.stream().anyMatch(m -> m.getBody().isPresent() && !extendsType(Types.enclosingType(m), c, 0))) {
                    continue;
                }
                for (MethodDeclaration o : ms) {
                    TypeDeclaration<?> sub = Types.enclosingType(o);
                    if (o.getBody().isEmpty()
                            || !(sub instanceof ClassOrInterfaceDeclaration sc)
                            || sc.isAbstract()
                            || sc.isInterface()
                            || derived.stream().anyMatch(d -> d.location.equals(repo.span(o, o.getName())))
                            // one consumer per concrete class, listed at its first override: a second abstract
                            // method it overrides is the same consumer (its trace dispatches both)
                            || derived.stream().anyMatch(d -> d.self == sc)) {
                        continue;
                    }
                    derived.add(inherited(e, sc, o));
                }
            }
            if (!derived.isEmpty()) {
                entries.remove(e);
                entries.addAll(derived);
            }
        }
    }

    /**
     * A listener that only hands the message to the project's own handler type: a JMS {@code onMessage} (or any
     * handler the scan found) whose one statement is {@code handler.setListener(message)} on a variable of a
     * repository abstract class or interface ({@code QueueListener}, passed through a factory to
     * {@code setMessageListener}). The work is each implementation of that method, anonymous ({@code new
     * QueueListener() { setListener(m) {…} }} handed to the project's {@code consume(queue, address, listener)}) or
     * named, so each becomes the consumer, acknowledged as the listener is; the delegating listener is dropped.
     */
    private void delegatedHandlers() {
        for (Entry e : List.copyOf(entries)) {
            if (!(e.decl instanceof MethodDeclaration m)
                    || m.getParameters().isEmpty()
                    || !(e.body instanceof com.github.javaparser.ast.stmt.BlockStmt b)
                    || b.getStatements().size() != 1
                    || !(b.getStatement(0) instanceof com.github.javaparser.ast.stmt.ExpressionStmt es)
                    || !(es.getExpression() instanceof MethodCallExpr call)
                    || !(call.getScope().orElse(null) instanceof NameExpr handler)
                    || e.ack == Entry.Ack.EXPLICIT
                    || !passesThrough(m, call)) {
                continue;
            }
            String type = types.typeOf(handler);
            if (type == null || !types.isRepoType(type)) {
                continue;
            }
            List<Entry> derived = new ArrayList<>();
            for (TypeDeclaration<?> t : repo.types(type, handler)) {
                if (!(t instanceof ClassOrInterfaceDeclaration c)
                        || !(c.isInterface() || c.isAbstract())
                        || c.getMethodsByName(call.getNameAsString()).stream()
                                .noneMatch(d -> d.getBody().isEmpty()
                                        && d.getParameters().size()
                                                == call.getArguments().size())) {
                    continue;
                }
                // its implementations, named or anonymous, in files the scan had no reason to parse yet
                repo.parseExtending(Set.of(c.getNameAsString()));
                repo.parseHolding(List.of("new " + c.getNameAsString() + "("));
                for (Repo.Source s : repo.sources()) {
                    if (!s.text().contains(c.getNameAsString())) {
                        continue;
                    }
                    List<MethodDeclaration> overrides = new ArrayList<>();
                    for (ObjectCreationExpr oc : s.cu().findAll(
                                    ObjectCreationExpr.class,
                                    o -> o.getType().getNameAsString().equals(c.getNameAsString())
                                            && o.getAnonymousClassBody().isPresent())) {
                        for (com.github.javaparser.ast.body.BodyDeclaration<?> d :
                                oc.getAnonymousClassBody().get()) {
                            if (d instanceof MethodDeclaration o && overrides(o, call)) {
                                overrides.add(o);
                            }
                        }
                    }
                    for (ClassOrInterfaceDeclaration sub : s.cu().findAll(ClassOrInterfaceDeclaration.class)) {
                        boolean implementsIt = sub != c
                                && !sub.isAbstract()
                                && !sub.isInterface()
                                && java.util.stream.Stream.concat(
                                                sub.getExtendedTypes().stream(), sub.getImplementedTypes().stream())
                                        .anyMatch(st -> st.getNameAsString().equals(c.getNameAsString()));
                        if (implementsIt) {
                            sub.getMethodsByName(call.getNameAsString()).stream()
                                    .filter(o -> overrides(o, call))
                                    .forEach(overrides::add);
                        }
                    }
                    for (MethodDeclaration o : overrides) {
                        Entry d = inherited(e, null, o);
                        d.name = c.getNameAsString() + "." + o.getNameAsString() + " @"
                                + o.getName().getBegin().map(p -> p.line).orElse(0);
                        d.decl = o;
                        d.body = o.getBody().get();
                        d.self = null;
                        d.location = repo.span(o, o.getName());
                        d.source = s;
                        d.kind = e.kind + " through " + c.getNameAsString() + "." + o.getNameAsString();
                        derived.add(d);
                    }
                }
            }
            if (!derived.isEmpty()) {
                entries.remove(e);
                byBody.remove(e.body);
                derived.forEach(d -> byBody.put(d.body, d));
                entries.addAll(derived);
            }
        }
    }

    /**
     * The call passes the handler's parameters on as they are, in order: the callee receives what the listener got,
     * so it is the listener (a call that also passes a channel and a delivery tag it computed settles the message
     * itself and is not this).
     */
    private static boolean passesThrough(MethodDeclaration m, MethodCallExpr call) {
        if (call.getArguments().size() != m.getParameters().size()) {
            return false;
        }
        for (int i = 0; i < call.getArguments().size(); i++) {
            if (!(call.getArgument(i) instanceof NameExpr n)
                    || !n.getNameAsString().equals(m.getParameter(i).getNameAsString())) {
                return false;
            }
        }
        return true;
    }

    private static boolean overrides(MethodDeclaration o, MethodCallExpr call) {
        return o.getNameAsString().equals(call.getNameAsString())
                && o.getBody().isPresent()
                && o.getParameters().size() == call.getArguments().size();
    }

    private static boolean onThis(MethodCallExpr x) {
        return x.getScope().isEmpty() || x.getScope().get().isThisExpr();
    }

    /** {@code t} extends {@code c}, directly or through repository classes between them. */
    private boolean extendsType(TypeDeclaration<?> t, TypeDeclaration<?> c, int depth) {
        if (!(t instanceof ClassOrInterfaceDeclaration ct) || depth > 5) {
            return false;
        }
        for (ClassOrInterfaceType st : ct.getExtendedTypes()) {
            for (TypeDeclaration<?> up : repo.types(st.getNameAsString(), t)) {
                if (up == c || extendsType(up, c, depth + 1)) {
                    return true;
                }
            }
        }
        return false;
    }

    /** The abstract consumer {@code e} as the concrete class {@code sub} runs it, listed at its override {@code o}. */
    private Entry inherited(Entry e, ClassOrInterfaceDeclaration sub, MethodDeclaration o) {
        Entry d = new Entry();
        d.kind = e.kind;
        d.broker = e.broker;
        String subName = sub == null ? "" : sub.getNameAsString(); // null: an anonymous implementation
        d.name = subName + "." + o.getNameAsString();
        d.decl = e.decl;
        d.body = e.body;
        d.self = sub;
        d.location = repo.span(o, o.getName());
        if (e.decl instanceof MethodDeclaration handler) {
            // a handler method the runtime calls (not a loop of the repository's own): the method it calls is the
            // inherited one, so the consumer is listed there, under the concrete class's name
            d.name = subName + "." + handler.getNameAsString();
            d.location = e.location;
        } else if (e.decl instanceof LambdaExpr) {
            // so is a handler lambda the base class gives the client (a MessageReceiver its getReceiver() returns)
            d.location = e.location;
        }
        d.source = o.findCompilationUnit()
                .flatMap(cu -> cu.containsData(Repo.SOURCE) ? Optional.of(cu.getData(Repo.SOURCE)) : Optional.empty())
                .orElse(e.source);
        d.ack = e.ack;
        d.ackText = e.ackText;
        d.ackSetting = e.ackSetting;
        d.framework = e.framework;
        d.frameworkText = e.frameworkText;
        d.frameworkLocation = e.frameworkLocation;
        d.transactional = e.transactional;
        d.kafkaTransaction = e.kafkaTransaction;
        d.jtaTransaction = e.jtaTransaction;
        d.loop = e.loop;
        d.batch = e.batch;
        d.leaseMs = e.leaseMs;
        d.batchLocation = e.batchLocation;
        d.leaseName = e.leaseName;
        if (e.decl instanceof MethodCallExpr poll && e.kind.equals("KafkaConsumer.poll loop")) {
            kafkaAck(d, d.source, poll); // the settings it passes to super(…) are its own
        }
        return d;
    }

    Entry add(Repo.Source s, String kind, String broker, String name, Node decl, Node body, Node at) {
        Entry existing = byBody.get(body);
        if (existing != null && secondReceiver(existing.decl, decl)) {
            // a second pull from another receiver in the same method or loop is a consumer of its own (another
            // queue, another group); the first one's trace covers the shared body, this one is listed at its pull
            // and traced from its own statement
            body = decl.findAncestor(com.github.javaparser.ast.stmt.Statement.class)
                    .map(Node.class::cast)
                    .orElse(decl);
            name = name + " " + ((MethodCallExpr) decl).getScope().get();
            existing = byBody.get(body);
        }
        if (existing != null) {
            return existing;
        }
        Entry e = new Entry();
        e.kind = kind;
        e.broker = broker;
        e.name = name;
        e.decl = decl;
        e.body = body;
        // a method spans from its first annotation to its name: the annotations above it (a multi-line
        // @KafkaListener, @Override, @Transactional) can run over more lines than a reader looks past
        e.location = at instanceof MethodDeclaration m ? repo.span(m, m.getName()) : held(decl, at);
        e.source = s;
        String named = e.name;
        if (entries.stream().anyMatch(x -> x.source == s && x.name.equals(named))) {
            // two consumers set up in one method (two routes in configure(), two subscriptions): the id is file#name,
            // so the second is named by its line or its findings are listed under the first
            e.name = named + " @" + e.location.line();
        }
        if (decl instanceof MethodDeclaration m) {
            e.transactional = Types.isTransactional(m);
        }
        byBody.put(body, e);
        entries.add(e);
        return e;
    }

    /**
     * Where a consumer whose handler is a lambda or an anonymous class held in a variable ({@code DeliverCallback cb =
     * (tag, d) -> …;} then {@code basicConsume(q, false, cb, …)}, {@code MessageReceiver receiver = …} then {@code
     * Subscriber.newBuilder(name, receiver)}) is: from its declaration to the registration call, the two places a
     * reader points at. A handler written in the call is located at the call.
     */
    private Location held(Node handler, Node at) {
        Location call = repo.loc(at);
        if (!(handler instanceof LambdaExpr || handler instanceof ObjectCreationExpr)
                || handler.isAncestorOf(at)
                || at.isAncestorOf(handler)
                || handler.findCompilationUnit().orElse(null)
                        != at.findCompilationUnit().orElse(null)) {
            return call;
        }
        Node from = handler.getParentNode()
                .filter(VariableDeclarator.class::isInstance)
                .map(Node.class::cast)
                .orElse(handler);
        int first = from.getBegin().map(p -> p.line).orElse(call.line());
        if (first >= call.line() || call.line() - first > 60) {
            return call;
        }
        Location decl = repo.loc(from);
        return new Location(decl.file(), decl.line(), decl.column(), decl.snippet(), call.line());
    }

    /** Two pulls on different receivers ({@code rocketMQTemplate.receive}, {@code extRocketMQTemplate.receive}). */
    private static boolean secondReceiver(Node first, Node next) {
        return first instanceof MethodCallExpr a
                && next instanceof MethodCallExpr b
                && a != b
                && a.getScope().isPresent()
                && b.getScope().isPresent()
                && !a.getScope().get().toString().equals(b.getScope().get().toString());
    }

    static String owner(Node n) {
        TypeDeclaration<?> t = Types.enclosingType(n);
        String cls = t == null ? "?" : t.getNameAsString();
        if (n instanceof MethodDeclaration m) {
            return cls + "." + m.getNameAsString();
        }
        return Types.ancestor(n, MethodDeclaration.class)
                .map(m -> cls + "." + m.getNameAsString())
                .orElse(cls);
    }

    // ---- annotation-driven listeners ------------------------------------------------------------

    /**
     * Listener methods of a class, or of an anonymous class body (a {@code @Bean} returning an anonymous subclass
     * whose overriding method carries {@code @RabbitListener}: Spring reads the annotations off the bean's class,
     * whether it has a name or not). An anonymous body has no class annotations.
     */
    private void annotated(Repo.Source s, List<AnnotationExpr> declared, List<MethodDeclaration> methods) {
        List<AnnotationExpr> classAnnotations = withMeta(declared);
        boolean classRabbit = Types.annotated(classAnnotations, "RabbitListener");
        boolean classKafka = Types.annotated(classAnnotations, "KafkaListener");
        boolean axon =
                s.cu().getImports().stream().anyMatch(i -> i.getNameAsString().startsWith("org.axonframework"));
        for (MethodDeclaration m : methods) {
            if (m.getBody().isEmpty()) {
                continue;
            }
            List<AnnotationExpr> anns = withMeta(m.getAnnotations());
            // the repeatable annotations' containers (@KafkaListeners({…}), @JmsListeners, @RabbitListeners) hold
            // listeners
            // of the same method
            if (Types.annotated(anns, "KafkaListener", "KafkaListeners")
                    || (classKafka && Types.annotated(anns, "KafkaHandler"))) {
                Entry e = add(
                        s, "@KafkaListener", "kafka", owner(m), m, m.getBody().get(), m);
                springKafka(
                        e,
                        m,
                        Types.annotation(anns, "KafkaListener")
                                .or(() -> Types.annotation(classAnnotations, "KafkaListener"))
                                .orElse(null));
            } else if (Types.annotated(anns, "DltHandler")) {
                // Spring Kafka's non-blocking retries: the dead-letter topic's listener container calls it per record
                Entry e =
                        add(s, "@DltHandler", "kafka", owner(m), m, m.getBody().get(), m);
                springKafka(
                        e,
                        m,
                        Types.annotation(classAnnotations, "KafkaListener").orElse(null));
            } else if (Types.annotated(anns, "RabbitListener", "RabbitListeners")
                    || (classRabbit && Types.annotated(anns, "RabbitHandler"))) {
                Entry e = add(
                        s,
                        "@RabbitListener",
                        "rabbitmq",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                springRabbit(
                        e,
                        m,
                        Types.annotation(anns, "RabbitListener")
                                .or(() -> Types.annotation(classAnnotations, "RabbitListener"))
                                .orElse(null));
            } else if (Types.annotated(anns, "SqsListener")) {
                Entry e = add(s, "@SqsListener", "sqs", owner(m), m, m.getBody().get(), m);
                springSqs(e, m, Types.annotation(anns, "SqsListener").orElse(null));
            } else if (Types.annotated(anns, "NotificationMessageMapping")) {
                // an SNS HTTP(S) subscription endpoint: SNS retries the POST until the endpoint answers 2xx
                Entry e = add(
                        s,
                        "@NotificationMessageMapping",
                        "sns",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = "SNS retries the HTTP delivery until the method returns normally";
            } else if (Types.annotated(anns, "JmsListener", "JmsListeners")) {
                Entry e = add(s, "@JmsListener", "jms", owner(m), m, m.getBody().get(), m);
                e.ackText = "the JMS container acknowledges after the listener returns";
                e.jtaTransaction =
                        jtaTransaction(s, Types.annotation(anns, "JmsListener").orElse(null));
                Location plain = autoAcknowledgeFactory(
                        s, Types.annotation(anns, "JmsListener").orElse(null));
                if (plain != null && e.jtaTransaction == null) {
                    e.ack = Entry.Ack.AUTO;
                    e.ackText = "its container factory (" + plain.file() + ":" + plain.line()
                            + ") builds a DefaultMessageListenerContainer that is neither session-transacted nor given"
                            + " a transaction manager: in AUTO_ACKNOWLEDGE mode that container acknowledges the message"
                            + " before the listener runs, and a listener that throws or crashes does not get it again";
                }
            } else if (Types.annotated(anns, "Consume")
                    && s.cu().getImports().stream()
                            .anyMatch(i -> i.getNameAsString().startsWith("org.apache.camel"))) {
                // a Camel POJO consumer: the endpoint's consumer calls the method per exchange
                Entry e = add(
                        s, "Camel @Consume", "camel", owner(m), m, m.getBody().get(), m);
                e.ackText = "the Camel consumer completes the exchange after the method returns";
            } else if (Types.annotated(anns, "StreamListener")) {
                Entry e = add(
                        s, "@StreamListener", "stream", owner(m), m, m.getBody().get(), m);
                e.ackText = "the binder acknowledges after the listener returns";
            } else if (axon && Types.annotated(anns, "EventHandler", "SagaEventHandler")) {
                Entry e = add(
                        s,
                        "Axon @EventHandler",
                        "axon",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = "the tracking processor stores its token after the handler";
                e.framework = Entry.Framework.DATABASE;
                e.frameworkText = "Axon tracking token, stored in the handler's transaction";
            } else if (Types.annotated(classAnnotations, "SqsListener") && Types.annotated(anns, "SqsHandler")) {
                Entry e = add(
                        s,
                        "@SqsListener/@SqsHandler",
                        "sqs",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                springSqs(
                        e, m, Types.annotation(classAnnotations, "SqsListener").orElse(null));
            } else if (Types.annotated(anns, "JobWorker", "ZeebeWorker")) {
                Entry e = add(
                        s, "Zeebe @JobWorker", "zeebe", owner(m), m, m.getBody().get(), m);
                e.ackText = "the job completes after the worker returns; a crash or timeout activates it again";
            } else if (Types.annotated(anns, "WorkerTask") && conductor(s)) {
                Entry e = add(
                        s,
                        "Conductor @WorkerTask",
                        "conductor",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = CONDUCTOR_ACK;
            } else if (Types.annotated(anns, "Incoming")) {
                Entry e = add(
                        s,
                        "MicroProfile @Incoming",
                        "smallrye",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = "the connector acknowledges after the method (or its returned stage) completes";
            } else if (Types.annotated(anns, "EventHandlerMethod")
                    && Types.annotated(classAnnotations, "EventSubscriber")) {
                // Eventuate Client (event sourcing): the subscription dispatches each event to the method
                Entry e = add(
                        s,
                        "Eventuate Client @EventHandlerMethod",
                        "eventuate",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = "Eventuate Client acknowledges the event after the handler (or the future it returns)"
                        + " completes";
            } else if (Types.annotated(anns, "EventuateCommandHandler")) {
                Entry e = add(
                        s,
                        "Eventuate @EventuateCommandHandler",
                        "eventuate",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                eventuateDedupe(e);
            } else if (Types.annotated(anns, "EventuateDomainEventHandler")) {
                Entry e = add(
                        s,
                        "Eventuate @EventuateDomainEventHandler",
                        "eventuate",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                eventuateDedupe(e);
            } else if (Types.annotated(anns, "ServiceActivator") && boundChannel(s, anns)) {
                // Spring Cloud Stream's annotation model: @EnableBinding(Sink.class) binds the input channel the
                // activator reads to the broker
                Entry e = add(
                        s,
                        "Spring Cloud Stream @ServiceActivator",
                        "stream",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = "the binder acknowledges after the activator returns";
            } else if (Types.annotated(anns, "ServiceActivator")
                    && (Types.annotated(anns, "IdempotentReceiver") || integrationInbound.containsKey(s.module()))) {
                boolean pubSub = pubSubInbound.containsKey(s.module());
                Entry e = add(
                        s,
                        pubSub
                                ? "Spring Cloud GCP @ServiceActivator (Pub/Sub)"
                                : "Spring Integration @ServiceActivator",
                        pubSub ? "pubsub" : "integration",
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = pubSub
                        ? "PubSubInboundChannelAdapter acks after the flow returns (AckMode.AUTO), or the code acks"
                                + " the original message (AckMode.MANUAL)"
                        : "the inbound adapter acknowledges after the flow returns";
                Types.annotation(anns, "IdempotentReceiver").ifPresent(a -> {
                    e.framework = Entry.Framework.WEAK;
                    e.frameworkText =
                            "Spring Integration idempotent receiver: its MetadataStore commits apart from the effect";
                    e.frameworkLocation = repo.loc(a);
                });
            }
        }
    }

    /**
     * A {@code @ServiceActivator} on a channel Spring Cloud Stream binds ({@code inputChannel = Sink.INPUT} in a class
     * or file that declares {@code @EnableBinding}), not on an error channel.
     */
    private static boolean boundChannel(Repo.Source s, List<AnnotationExpr> anns) {
        String activator =
                Types.annotation(anns, "ServiceActivator").map(Object::toString).orElse("");
        return (s.text().contains("@EnableBinding") || s.text().contains("org.springframework.cloud.stream.messaging."))
                && activator.contains("inputChannel")
                && !activator.toLowerCase(Locale.ROOT).contains("error");
    }

    /**
     * The annotations {@code anns} stand for: themselves, and those on each annotation type the repository declares
     * among them, transitively. Spring Kafka, AMQP and JMS document their listener annotations as meta-annotations
     * ({@code @KafkaListener public @interface OrderEvents {…}} then {@code @OrderEvents void on(Order o)}): the
     * container reads them through the project's own annotation.
     */
    private List<AnnotationExpr> withMeta(List<AnnotationExpr> anns) {
        if (metaAnnotations.isEmpty()) {
            return anns;
        }
        List<AnnotationExpr> out = new ArrayList<>(anns);
        Set<String> seen = new java.util.HashSet<>();
        for (int i = 0; i < out.size() && i < 64; i++) {
            String n = out.get(i).getName().getIdentifier();
            List<AnnotationExpr> up = metaAnnotations.get(n);
            if (up != null && seen.add(n)) {
                out.addAll(up);
            }
        }
        return out;
    }

    private void springKafka(Entry e, MethodDeclaration m, AnnotationExpr listener) {
        String props = listener == null ? "" : listener.toString().replace(" ", "");
        Settings.Setting auto = settings.first(
                e.source,
                List.of(
                        "spring.kafka.consumer.enable-auto-commit",
                        "spring.kafka.consumer.properties.enable.auto.commit",
                        "enable.auto.commit"));
        boolean manual =
                m.getParameters().stream().anyMatch(p -> p.getType().asString().endsWith("Acknowledgment"));
        Settings.Setting ackMode = settings.first(e.source, List.of("spring.kafka.listener.ack-mode"));
        if (props.contains("enable.auto.commit=true") || props.contains("enable.auto.commit:true")) {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = repo.loc(listener);
            e.timerCommit = true;
            e.ackText = "enable.auto.commit=true on the listener: offsets commit on a timer";
        } else if (auto != null && auto.isTrue()) {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = auto.location();
            e.timerCommit = true;
            e.ackText = "enable.auto.commit=true: offsets commit on a timer, whatever the listener did";
        } else if (manual
                || (ackMode != null && ackMode.value().toUpperCase(Locale.ROOT).startsWith("MANUAL"))) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "manual ack mode: Acknowledgment.acknowledge()";
        } else {
            e.ackText = "the container commits offsets after the listener returns (ack-mode "
                    + (ackMode == null ? "BATCH, the default" : ackMode.value()) + ")";
        }
        kafkaLease(e);
        e.kafkaTransaction = kafkaTransaction(e.source);
    }

    /**
     * Where the module's listener containers get a Kafka transaction manager: Spring Boot gives one
     * when {@code spring.kafka.producer.transaction-id-prefix} is set, or a container factory is
     * handed a {@code KafkaTransactionManager}. Then a {@code KafkaTemplate} send in the listener and
     * the consumed offset commit in one transaction.
     */
    private Location kafkaTransaction(Repo.Source s) {
        Settings.Setting prefix = settings.module(s.module(), "spring.kafka.producer.transaction-id-prefix");
        if (prefix != null) {
            return prefix.location();
        }
        for (Repo.Source o : repo.sources()) {
            if (!o.module().equals(s.module())) {
                continue;
            }
            for (MethodCallExpr c : o.cu().findAll(
                            MethodCallExpr.class,
                            c -> c.getNameAsString().matches("setTransactionManager|setKafkaAwareTransactionManager")
                                    && c.toString().contains("ontainerProperties")
                                    && o.text().contains("KafkaTransactionManager"))) {
                return repo.loc(c);
            }
        }
        return null;
    }

    private static final Pattern JTA_WORDS = Pattern.compile(
            "(?s).*(spring-boot-starter-jta|JtaTransactionManager|UserTransactionManager|bitronix\\.tm|com\\.atomikos"
                    + "|narayana).*");
    private static final Pattern CONTAINER_FACTORY = Pattern.compile("(?s).*containerFactory\\s*=\\s*\"([^\"]+)\".*");

    /**
     * Where a {@code @JmsListener}'s container joins a JTA (XA) transaction: its module runs a JTA
     * transaction manager (a {@code spring-boot-starter-jta-*} dependency, Atomikos, Bitronix, Narayana)
     * and the listener's container factory is handed the transaction manager, or is Spring Boot's
     * default one, which takes the JTA manager by itself. Then the receive, the JDBC writes through the
     * module's XA data sources and the sends through its XA connection factories commit or roll back
     * together: a redelivery follows a rollback of the first attempt's writes, not a committed copy.
     */
    private Location jtaTransaction(Repo.Source s, AnnotationExpr listener) {
        Location jta = jtaManager(s);
        if (jta == null) {
            return null;
        }
        MethodDeclaration bean = containerFactoryBean(s, listener, null);
        if (bean == null) {
            return jta; // Spring Boot's default factory, configured with the JTA transaction manager
        }
        // the project's own factory: in the JTA transaction only when it is handed the manager
        return bean.findAll(MethodCallExpr.class, c -> c.getNameAsString().equals("setTransactionManager")).stream()
                .findFirst()
                .map(repo::loc)
                .orElse(null);
    }

    /** Where the module of {@code s} runs a JTA transaction manager (its build or one of its sources), or null. */
    private Location jtaManager(Repo.Source s) {
        Location jta = null;
        for (Path f : repo.otherFiles) {
            String n = f.getFileName().toString();
            if (f.startsWith(s.module()) && (n.equals("pom.xml") || n.startsWith("build.gradle"))) {
                try {
                    if (JTA_WORDS.matcher(java.nio.file.Files.readString(f)).matches()) {
                        jta = repo.loc(f, 1, n);
                    }
                } catch (java.io.IOException | RuntimeException ex) {
                    // unreadable build file: no JTA evidence from it
                }
            }
        }
        for (Repo.Source o : repo.sources()) {
            if (jta == null
                    && o.module().equals(s.module())
                    && JTA_WORDS.matcher(o.text()).matches()) {
                jta = repo.loc(o.path(), 1, o.rel());
            }
        }
        return jta;
    }

    /**
     * The {@code @Bean} method, in {@code s}'s module, of the container factory a {@code @JmsListener} names
     * (Spring's default name when it names none), in a source containing {@code mustContain} when not null;
     * null when the project declares none.
     */
    private MethodDeclaration containerFactoryBean(Repo.Source s, AnnotationExpr listener, String mustContain) {
        Matcher named = CONTAINER_FACTORY.matcher(listener == null ? "" : listener.toString());
        String factory = named.matches() ? named.group(1) : "jmsListenerContainerFactory";
        for (Repo.Source o : repo.sources()) {
            if (!o.module().equals(s.module())
                    || (mustContain != null && !o.text().contains(mustContain))) {
                continue;
            }
            for (MethodDeclaration bean : o.cu().findAll(
                            MethodDeclaration.class,
                            b -> Types.annotated(b.getAnnotations(), "Bean")
                                    && (b.getNameAsString().equals(factory)
                                            || Types.annotation(b.getAnnotations(), "Bean")
                                                    .map(a -> a.toString().contains("\"" + factory + "\""))
                                                    .orElse(false)))) {
                return bean;
            }
        }
        return null;
    }

    /** Acknowledgement modes under which a DefaultMessageListenerContainer acknowledges only after the listener. */
    private static final Pattern AFTER_LISTENER_ACK = Pattern.compile(
            "(?s).*setSessionAcknowledgeMode(Name)?\\((Session\\.|\")?(CLIENT_ACKNOWLEDGE|SESSION_TRANSACTED|[02]\\)).*");

    /**
     * Where a {@code @JmsListener}'s container factory is the project's own {@code new
     * DefaultJmsListenerContainerFactory()} left in AUTO_ACKNOWLEDGE: not session-transacted, no transaction manager,
     * not configured by Spring Boot's configurer (which makes it session-transacted), no client acknowledgement. Spring
     * documents that such a DefaultMessageListenerContainer acknowledges the message before the listener runs and does
     * not redeliver it when the listener throws. Null when the factory is Boot's default or acknowledges after the
     * listener.
     */
    private Location autoAcknowledgeFactory(Repo.Source s, AnnotationExpr listener) {
        MethodDeclaration bean = containerFactoryBean(s, listener, "DefaultJmsListenerContainerFactory");
        if (bean == null) {
            return null;
        }
        ObjectCreationExpr created = bean.findFirst(
                        ObjectCreationExpr.class,
                        oc -> oc.getType().getNameAsString().equals("DefaultJmsListenerContainerFactory"))
                .orElse(null);
        String text = bean.toString().replace(" ", "");
        if (created == null
                || text.contains("setSessionTransacted(true)")
                || text.contains("setTransactionManager(")
                || text.contains(".configure(")
                || AFTER_LISTENER_ACK.matcher(text).matches()) {
            return null;
        }
        return repo.loc(created);
    }

    private void springRabbit(Entry e, MethodDeclaration m, AnnotationExpr listener) {
        String ann = listener == null ? "" : listener.toString().replace(" ", "");
        Settings.Setting mode = settings.first(
                e.source,
                List.of(
                        "spring.rabbitmq.listener.simple.acknowledge-mode",
                        "spring.rabbitmq.listener.direct.acknowledge-mode"));
        String javaMode = moduleText(e.source.module(), "AcknowledgeMode.");
        boolean channel =
                m.getParameters().stream().anyMatch(p -> p.getType().asString().endsWith("Channel"));
        if (ann.contains("ackMode=\"NONE\"")
                || (mode != null && mode.value().equalsIgnoreCase("none"))
                || "NONE".equals(javaMode)) {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = mode != null ? mode.location() : repo.loc(listener == null ? m : listener);
            e.ackText = "acknowledge-mode NONE: the broker forgets the message on delivery";
        } else if (ann.contains("ackMode=\"MANUAL\"")
                || (mode != null && mode.value().equalsIgnoreCase("manual"))
                || "MANUAL".equals(javaMode)
                || channel) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "manual acknowledge: channel.basicAck";
        } else {
            e.ackText = "the container acks after the listener returns (acknowledge-mode AUTO); an exception requeues";
        }
    }

    private void springSqs(Entry e, MethodDeclaration m, AnnotationExpr listener) {
        String ann = listener == null ? "" : listener.toString().replace(" ", "");
        Settings.Setting mode = settings.first(e.source, List.of("spring.cloud.aws.sqs.listener.acknowledgement-mode"));
        if (ann.contains("ALWAYS") || (mode != null && mode.value().equalsIgnoreCase("always"))) {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = mode != null && !ann.contains("ALWAYS") ? mode.location() : repo.loc(listener);
            e.ackText = "deleted whatever the outcome (ALWAYS): a failed message is gone";
        } else if (ann.contains("MANUAL")
                || m.getParameters().stream()
                        .anyMatch(p -> p.getType().asString().endsWith("Acknowledgement"))) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "manual acknowledgement";
        } else {
            e.ackText = "deleted after the listener returns (ON_SUCCESS, the default)";
        }
    }

    private String moduleText(Path module, String prefix) {
        for (Repo.Source s : repo.sources()) {
            if (!s.module().equals(module)) {
                continue;
            }
            for (com.github.javaparser.ast.expr.FieldAccessExpr fa :
                    s.cu().findAll(com.github.javaparser.ast.expr.FieldAccessExpr.class)) {
                if ((fa.getScope().toString() + ".").endsWith(prefix)) {
                    return fa.getNameAsString();
                }
            }
        }
        return null;
    }

    private void kafkaLease(Entry e) {
        Settings.Setting records =
                settings.first(e.source, List.of("spring.kafka.consumer.max-poll-records", "max.poll.records"));
        Settings.Setting interval = settings.first(
                e.source, List.of("spring.kafka.consumer.properties.max.poll.interval.ms", "max.poll.interval.ms"));
        if (records != null && interval != null && records.literal() && interval.literal()) {
            e.batch = records.asLong(0);
            e.leaseMs = interval.asLong(0);
            e.batchLocation = records.location();
            e.leaseName = "max.poll.interval.ms";
        }
    }

    // ---- interfaces and supertypes --------------------------------------------------------------

    /**
     * A Conductor worker's task is completed with what the worker returns; one it does not complete
     * within the task's response timeout (a crash, a hang, a lost update) is scheduled again, so its
     * effects run again like a redelivered message's.
     */
    private static final String CONDUCTOR_ACK = "Conductor completes the task with the worker's result; a task not"
            + " completed within its response timeout is scheduled again";

    /** The file uses Netflix Conductor's (or Orkes', or the Swift fork's) worker API. */
    private static boolean conductor(Repo.Source s) {
        return s.cu().getImports().stream().anyMatch(i -> {
            String n = i.getNameAsString();
            return n.startsWith("com.netflix.conductor")
                    || n.startsWith("io.orkes.conductor")
                    || n.startsWith("com.swiftconductor");
        });
    }

    private void implemented(
            Repo.Source s,
            TypeDeclaration<?> c,
            NodeList<ClassOrInterfaceType> implemented,
            NodeList<ClassOrInterfaceType> extended) {
        for (ClassOrInterfaceType t : implemented) {
            String n = t.getNameAsString();
            String arg = t.getTypeArguments()
                    .filter(a -> !a.isEmpty())
                    .map(a -> Types.simple(a.get(0)))
                    .orElse("");
            if (n.equals("RequestHandler") && LAMBDA_EVENTS.contains(arg)) {
                for (MethodDeclaration m : c.getMethodsByName("handleRequest")) {
                    m.getBody().ifPresent(b -> lambda(s, m, b, arg, "Lambda RequestHandler<" + arg + ">"));
                }
            } else if (n.equals("RequestHandler") && arg.equals("Map")) {
                for (MethodDeclaration m : c.getMethodsByName("handleRequest")) {
                    String event = mapEnvelope(m);
                    if (m.getBody().isPresent() && event != null) {
                        lambda(s, m, m.getBody().get(), event, "Lambda RequestHandler<Map> (" + event + ")");
                    }
                }
            } else if (n.equals("RequestStreamHandler")) {
                for (MethodDeclaration m : c.getMethodsByName("handleRequest")) {
                    String event = streamEvent(m);
                    if (m.getBody().isPresent() && event != null) {
                        lambda(s, m, m.getBody().get(), event, "Lambda RequestStreamHandler (" + event + ")");
                    }
                }
            } else if (n.equals("Worker") && conductor(s)) {
                for (MethodDeclaration m : c.getMethodsByName("execute")) {
                    if (m.getParameters().size() == 1) {
                        m.getBody().ifPresent(b -> {
                            Entry e = add(s, "Conductor Worker.execute", "conductor", owner(m), m, b, m);
                            e.ackText = CONDUCTOR_ACK;
                        });
                    }
                }
            } else if (n.equals("JobHandler") && zeebe(s)) {
                // the plain Zeebe/Camunda client's handler class, given to client.newWorker()….handler(…)
                for (MethodDeclaration m : c.getMethodsByName("handle")) {
                    if (m.getParameters().size() == 2) {
                        m.getBody()
                                .ifPresent(
                                        b -> zeebeHandlerAck(add(s, "Zeebe JobHandler", "zeebe", owner(m), m, b, m)));
                    }
                }
            } else if ((n.equals("ShardRecordProcessor")
                            || n.equals("IRecordProcessor")
                            || n.equals("IShardRecordProcessor")
                            || n.equals("StreamsRecordProcessor"))
                    && s.cu().getImports().stream()
                            .anyMatch(i -> i.getNameAsString().contains("kinesis"))) {
                // the Kinesis Client Library (1.x and 2.x, and the DynamoDB Streams adapter): the processor
                // checkpoints itself; a worker that takes the lease over restarts from the last checkpoint
                for (MethodDeclaration m : c.getMethodsByName("processRecords")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "Kinesis KCL processRecords", "kinesis", owner(m), m, b, m);
                        e.ack = Entry.Ack.EXPLICIT;
                        e.ackText = "checkpointer.checkpoint() in the processor; records after the last checkpoint are"
                                + " processed again when the lease moves or the worker restarts";
                        e.loop = true;
                    });
                }
            } else if (n.equals("RocketMQListener") || n.equals("RocketMQReplyListener")) {
                for (MethodDeclaration m : c.getMethodsByName("onMessage")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "RocketMQListener.onMessage", "rocketmq", owner(m), m, b, m);
                        e.ackText = "the push consumer acknowledges after onMessage returns";
                    });
                }
            } else if ((n.equals("Processor") || n.equals("FixedKeyProcessor") || n.equals("ContextualProcessor"))
                    && s.cu().getImports().stream()
                            .anyMatch(i -> i.getNameAsString().startsWith("org.apache.kafka.streams"))) {
                for (MethodDeclaration m : c.getMethodsByName("process")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "Kafka Streams Processor.process", "kafka", owner(m), m, b, m);
                        e.ackText = "Kafka Streams commits the offset after the record is processed (at-least-once"
                                + " unless processing.guarantee is exactly_once, which covers topics and stores only)";
                    });
                }
            } else if (STREAMS_CALLBACKS.containsKey(n)
                    && s.cu().getImports().stream()
                            .anyMatch(i -> i.getNameAsString().startsWith("org.apache.kafka.streams"))) {
                for (MethodDeclaration m : c.getMethodsByName(STREAMS_CALLBACKS.get(n))) {
                    m.getBody()
                            .ifPresent(b -> streamsCallback(add(
                                    s, "Kafka Streams " + n + "." + m.getNameAsString(), "kafka", owner(m), m, b, m)));
                }
            } else if (n.equals("MessageReceiver") || n.equals("MessageReceiverWithAckResponse")) {
                for (MethodDeclaration m : c.getMethodsByName("receiveMessage")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "Pub/Sub " + n + ".receiveMessage", "pubsub", owner(m), m, b, m);
                        pubSubAck(e);
                    });
                }
            } else if (n.endsWith("MessageListener") && !n.equals("BatchMessageListener")) {
                for (MethodDeclaration m : c.getMethodsByName("received")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, n + ".received", "pulsar", owner(m), m, b, m);
                        e.ack = Entry.Ack.EXPLICIT;
                        e.ackText = "consumer.acknowledge(msg) in the listener";
                    });
                }
                for (MethodDeclaration m : c.getMethodsByName("onMessage")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, n + ".onMessage", "jms", owner(m), m, b, m);
                        e.ackText = "the container acknowledges after onMessage returns";
                    });
                }
            }
        }
        for (ClassOrInterfaceType t : extended) {
            if (t.getNameAsString().matches("ContextualProcessor|ContextualFixedKeyProcessor|AbstractProcessor")
                    && s.cu().getImports().stream()
                            .anyMatch(i -> i.getNameAsString().startsWith("org.apache.kafka.streams"))) {
                // the Processor API's base classes: a processor extending one is a processor all the same
                for (MethodDeclaration m : c.getMethodsByName("process")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "Kafka Streams Processor.process", "kafka", owner(m), m, b, m);
                        e.ackText = "Kafka Streams commits the offset after the record is processed (at-least-once"
                                + " unless processing.guarantee is exactly_once, which covers topics and stores only)";
                    });
                }
            }
            if (t.getNameAsString().equals("DefaultConsumer")) {
                for (MethodDeclaration m : c.getMethodsByName("handleDelivery")) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "RabbitMQ DefaultConsumer.handleDelivery", "rabbitmq", owner(m), m, b, m);
                        e.ack = Entry.Ack.EXPLICIT;
                        e.ackText = "channel.basicAck in handleDelivery";
                    });
                }
            }
        }
    }

    /** A Spring Integration endpoint type that receives from outside: an inbound or message-driven adapter or gateway. */
    private static final Pattern INBOUND_ADAPTER =
            Pattern.compile("\\w*(InboundChannelAdapter|MessageDrivenChannelAdapter|InboundGateway|MessageDrivenAdapter"
                    + "|MessageDrivenEndpoint|DestinationPollingSource)|KafkaMessageSource|AmqpMessageSource");

    /** The simple type of what a flow starts from: a created object, a field or variable, or a method of the class. */
    private String adapterType(Expression x) {
        if (x instanceof ObjectCreationExpr oc) {
            return oc.getType().getNameAsString();
        }
        if (x instanceof MethodCallExpr call && call.getScope().isEmpty()) {
            TypeDeclaration<?> owner = Types.enclosingType(call);
            if (owner != null) {
                for (MethodDeclaration m : owner.getMethodsByName(call.getNameAsString())) {
                    return Types.simple(m.getType());
                }
            }
            return null;
        }
        return types.typeOf(x);
    }

    // ---- the entry catalogue (entries.txt) --------------------------------------------------------

    private static final EntryCatalogue CATALOGUE = EntryCatalogue.get();

    /** A library's handler interface named for its broker: {@code KafkaMessageHandler}, {@code SqsMessageProcessor}. */
    private static final Pattern BROKER_HANDLER_TYPE = Pattern.compile(
            "\\w*?(Kafka|Rabbit|Amqp|Jms|JMS|Sqs|SQS|Pulsar|Nats|Mqtt|Kinesis|ServiceBus|PubSub|Pubsub|EventHub)\\w*"
                    + "(Handler|Listener|Consumer|Processor|Subscriber)");

    private static final Pattern HANDLER_METHOD = Pattern.compile("(handle|on|consume|process|receive)\\w*");

    /** A broker's own record or delivery type, by its simple name, and the broker it belongs to. */
    private static final Map<String, String> RECORD_TYPES = Map.of(
            "ConsumerRecord", "kafka",
            "ConsumerRecords", "kafka",
            "KafkaConsumerRecord", "kafka",
            "KafkaConsumerRecords", "kafka",
            "Delivery", "rabbitmq",
            "ServiceBusReceivedMessage", "servicebus",
            "ServiceBusReceivedMessageContext", "servicebus",
            "PubsubMessage", "pubsub",
            "ReceivedMessage", "pubsub");

    /** Library types whose methods take a record without consuming it: error handlers, interceptors, serializers. */
    private static final Pattern NOT_A_HANDLER_TYPE =
            Pattern.compile(".*(Error|Exception|Intercept|Recover|Serial|Convert|Filter|Strategy|Partition|Retry).*");

    /**
     * A class implementing (or extending) a library's handler type whose name says its broker and role, when nothing
     * else listed it: its public overrides named like a handler ({@code handleRecord}, {@code onMessage}) are run by the
     * library's own loop, outside the repository (NAV's {@code KafkaMessageHandler} under its shared consumer
     * manager). So is such an override of any library type when it takes the broker's own record ({@code
     * ConsumerRecord}, {@code Delivery}, {@code ServiceBusReceivedMessage}). That loop is taken to acknowledge when the
     * handler returns, as every container does.
     */
    private void libraryHandler(Repo.Source s, ClassOrInterfaceDeclaration c) {
        // an abstract class counts once a class of the repository extends it: folio's handlers override handle in
        // an abstract base that its two or three concrete subclasses only configure
        if (c.isInterface() || c.isAbstract() && !repo.isExtended(c.getNameAsString())) {
            return;
        }
        for (String n : librarySupertypes(c, new java.util.HashSet<>())) {
            Matcher named = BROKER_HANDLER_TYPE.matcher(n);
            if (NOT_A_HANDLER_TYPE.matcher(n).matches()) {
                continue;
            }
            for (MethodDeclaration m : c.getMethods()) {
                // or any library type whose handler-named override takes the broker's own record
                String broker = named.matches()
                        ? brokerOf(named.group(1))
                        : m.getParameters().stream()
                                .map(p -> RECORD_TYPES.get(Types.simple(p.getType())))
                                .filter(java.util.Objects::nonNull)
                                .findFirst()
                                .orElse(null);
                if (broker == null
                        || !m.isPublic()
                        || m.isStatic()
                        || m.getParameters().isEmpty()
                        || !HANDLER_METHOD.matcher(m.getNameAsString()).matches()
                        || !Types.annotated(m.getAnnotations(), "Override")
                        || m.getBody().isEmpty()
                        || byBody.containsKey(m.getBody().get())) {
                    continue;
                }
                Entry e = add(
                        s,
                        n + "." + m.getNameAsString(),
                        broker,
                        owner(m),
                        m,
                        m.getBody().get(),
                        m);
                e.ackText = "the library loop that calls " + n + "." + m.getNameAsString()
                        + " (not in this repository) acknowledges when it returns";
            }
        }
    }

    /**
     * The library types a class extends or implements, directly or through the repository's own (generic,
     * abstract) base classes and interfaces: {@code InventoryCreateHandler extends BaseAsyncRecordHandler<String,
     * String>}, whose base implements folio's {@code AsyncRecordHandler<K, V>}.
     */
    private List<String> librarySupertypes(ClassOrInterfaceDeclaration c, java.util.Set<String> seen) {
        List<String> out = new ArrayList<>();
        List<ClassOrInterfaceType> supertypes = new ArrayList<>(c.getImplementedTypes());
        supertypes.addAll(c.getExtendedTypes());
        for (ClassOrInterfaceType t : supertypes) {
            String n = t.getNameAsString();
            if (!seen.add(n)) {
                continue;
            }
            if (!types.isRepoType(n)) {
                out.add(n);
                continue;
            }
            for (TypeDeclaration<?> d : repo.types(n, c)) {
                if (d instanceof ClassOrInterfaceDeclaration base) {
                    out.addAll(librarySupertypes(base, seen));
                }
            }
        }
        return out;
    }

    /** Calls that iterate, map or compose what the code already holds: a method reference given to them is no handler. */
    private static final Set<String> NOT_A_REGISTRATION = Set.of(
            "forEach",
            "map",
            "flatMap",
            "filter",
            "peek",
            "collect",
            "compose",
            "onSuccess",
            "onFailure",
            "onComplete",
            "andThen",
            "thenApply",
            "thenAccept",
            "thenCompose",
            "whenComplete",
            "transform",
            "doOnNext",
            "doOnError",
            "handle",
            "apply",
            "accept",
            "execute",
            "submit",
            "runAsync",
            "supplyAsync");

    /**
     * A method of the class given as a method reference ({@code consumerWrapper.start(this::handle, module)}) to a
     * library type outside the repository, when the method takes the broker's own record ({@code
     * KafkaConsumerRecord}, {@code ConsumerRecord}, {@code Delivery}): the library's loop calls it per record and
     * acknowledges when it returns, as for a handler type the class implements. A reference given to a stream, a
     * future's composition or an executor, or one inside a consumer the scan already lists, is not one.
     */
    private void libraryCallback(Repo.Source s, MethodReferenceExpr ref) {
        if (!ref.getScope().isThisExpr()
                || !(ref.getParentNode().orElse(null) instanceof MethodCallExpr call)
                || !call.getArguments().contains(ref)
                || NOT_A_REGISTRATION.contains(call.getNameAsString())
                || call.getScope().isEmpty()) {
            return;
        }
        String library = types.typeOf(call.getScope().get());
        if (library == null || types.isRepoType(library) || insideEntry(ref)) {
            return;
        }
        TypeDeclaration<?> owner = Types.enclosingType(ref);
        if (owner == null) {
            return;
        }
        for (MethodDeclaration m : owner.getMethodsByName(ref.getIdentifier())) {
            String broker = m.getParameters().stream()
                    .map(p -> RECORD_TYPES.get(Types.simple(p.getType())))
                    .filter(java.util.Objects::nonNull)
                    .findFirst()
                    .orElse(null);
            if (broker == null
                    || m.getBody().isEmpty()
                    || byBody.containsKey(m.getBody().get())) {
                continue;
            }
            Entry e = add(
                    s,
                    library + "." + call.getNameAsString() + " callback",
                    broker,
                    owner(m),
                    m,
                    m.getBody().get(),
                    m);
            e.ackText = "the library that " + library + "." + call.getNameAsString() + " hands " + ref
                    + " to (not in this repository) acknowledges when it returns";
        }
    }

    /**
     * A consumer started through a library wrapper that commits a record's offset when its handler's future
     * completes, failed or not (the catalogue's failure lines: folio's {@code KafkaConsumerWrapper.start(handler, …)}),
     * with no record error handler set on its builder, a null one (a method whose default returns null), or one that
     * only logs: a record whose work failed is committed and never redelivered. Reported on the first consumer of the
     * library's handler type in the module: where no handler is set, at the start call; where one only logs, at it.
     */
    private void failedRecordCommits() {
        for (EntryCatalogue.Rule r : CATALOGUE.failures()) {
            for (Repo.Source s : repo.sources()) {
                String text = s.text();
                if (!text.contains(r.name())
                        || !text.contains("." + r.method() + "(")
                        || s.cu().getImports().stream()
                                .noneMatch(i -> i.getNameAsString().startsWith(r.pkg()))) {
                    continue;
                }
                for (MethodCallExpr start : s.cu().findAll(
                                MethodCallExpr.class,
                                c -> c.getNameAsString().equals(r.method())
                                        && !c.getArguments().isEmpty()
                                        && c.getScope().isPresent())) {
                    TypeDeclaration<?> owner = Types.enclosingType(start);
                    String type = types.typeOf(start.getScope().get());
                    if (owner == null
                            || !(r.name().equals(type)
                                    // a var or a lambda's parameter: the wrapper its class builds
                                    || (type == null || type.equals("var"))
                                            && owner.toString().contains(r.name()))) {
                        continue;
                    }
                    Map.Entry<Location, String> failed = failedCommit(r, owner, start);
                    if (failed == null) {
                        continue;
                    }
                    entries.stream()
                            .filter(e -> e.kind.startsWith(r.kind() + ".")
                                    && e.source.module().equals(s.module()))
                            .findFirst()
                            .or(() -> entries.stream()
                                    .filter(e -> e.kind.startsWith(r.kind() + "."))
                                    .findFirst())
                            .ifPresent(e -> e.failedCommits.putIfAbsent(failed.getKey(), failed.getValue()));
                }
            }
        }
    }

    /** Where and why the wrapper built in {@code owner} and started at {@code start} commits failed records, or null. */
    private Map.Entry<Location, String> failedCommit(
            EntryCatalogue.Rule r, TypeDeclaration<?> owner, MethodCallExpr start) {
        String setters = String.join("/", r.ackCalls());
        String commits = r.why() + ": a record whose work failed (a database or service down, a timeout) is committed"
                + " and never delivered again";
        List<MethodCallExpr> set = owner.findAll(
                MethodCallExpr.class,
                c -> r.ackCalls().contains(c.getNameAsString())
                        && c.getArguments().size() == 1
                        && c.toString().contains(r.name()));
        if (set.isEmpty()) {
            return Map.entry(repo.loc(start), "started with no " + setters + "; " + commits);
        }
        for (MethodCallExpr c : set) {
            Expression handler = c.getArgument(0);
            if (handler.isNullLiteralExpr()) {
                return Map.entry(repo.loc(start), "started with a null " + setters + "; " + commits);
            }
            if (handler instanceof MethodCallExpr m
                    && (m.getScope().isEmpty() || m.getScope().get().isThisExpr())
                    && owner.getMethodsByName(m.getNameAsString()).stream()
                            .anyMatch(d -> d.getBody()
                                    .map(b -> b.getStatements().size() == 1
                                            && b.getStatement(0) instanceof ReturnStmt ret
                                            && ret.getExpression()
                                                    .map(Expression::isNullLiteralExpr)
                                                    .orElse(false))
                                    .orElse(false))) {
                return Map.entry(
                        repo.loc(start),
                        "started with " + m.getNameAsString() + "(), whose default returns null, as its " + setters
                                + " (a subclass that does not override it has none); " + commits);
            }
            if (handler instanceof LambdaExpr l && onlyLogs(l.getBody())) {
                return Map.entry(repo.loc(c), "its " + setters + " only logs the failure; " + commits);
            }
        }
        return null;
    }

    /** A lambda body whose every statement is a logger's call: it records the failure and does nothing about it. */
    private static boolean onlyLogs(Statement body) {
        List<Statement> statements = body.isBlockStmt() ? body.asBlockStmt().getStatements() : List.of(body);
        return !statements.isEmpty()
                && statements.stream()
                        .allMatch(st -> st.isExpressionStmt()
                                && st.asExpressionStmt().getExpression() instanceof MethodCallExpr call
                                && call.getNameAsString()
                                        .matches("trace|debug|info|warn|error|fatal|log|println|printf")
                                && call.getScope()
                                        .map(x -> x.toString().matches("(?i)\\w*(log|logger)|System\\.(err|out)"))
                                        .orElse(false));
    }

    /** Method names no handler has: they convert, route, log or report a message someone else handles. */
    private static final Pattern NOT_A_HANDLER_METHOD = Pattern.compile(
            "(?i).*(serial|convert|map|parse|extract|build|create|to[A-Z_]|from|intercept|error|fail|recover|retry"
                    + "|filter|header|key|partition|log|print|format|valid|send|publish|produce|reply|dead|dlq|test"
                    + "|mock|equals|hash|compare|matches|supports|describe|trace|metric|record[A-Z]|wrap).*");

    /** Annotations a method carries for reasons of its own, not because a framework calls it. */
    private static final Set<String> INCIDENTAL_ANNOTATIONS = Set.of(
            "Override",
            "Transactional",
            "SneakyThrows",
            "SuppressWarnings",
            "Deprecated",
            "Nullable",
            "NonNull",
            "Nonnull",
            "Timed",
            "Counted",
            "Trace",
            "WithSpan",
            "NewSpan",
            "Async",
            "VisibleForTesting");

    /** Classes whose methods take a message to do something other than handle it. */
    private static final Pattern NOT_A_HANDLER_CLASS = Pattern.compile(
            ".*(Test|Mock|Stub|Fake|Error|Exception|Intercept|Recover|Serial|Convert|Mapper|Filter|Strategy|Partition"
                    + "|Retry|Producer|Publisher|Sender|Util|Utils|Helper|Builder|Factory)");

    /** {@code .name(} or {@code ::name}: a call of the method (by name) somewhere in a file's text. */
    private Set<String> calledNames;

    /**
     * A method taking a broker's own message (the catalogue's {@code record} lines: {@code ConsumerRecord}, a JMS or
     * AMQP {@code Message}, {@code MessageExt}, {@code ServiceBusReceivedMessage} …, by the package its file imports
     * it from) that nothing in the repository calls, named like a handler or carrying an annotation of a framework,
     * when nothing else listed it: whatever delivers the message calls it (a listener container behind the project's
     * own meta-annotation, a library's loop calling an interface the scan has no line for, a container configured in
     * XML or by bean name), and acknowledges as that runtime does when it returns. Methods that convert, route, log,
     * send or recover a message, and those of classes named for such work, are not handlers.
     */
    private void uncalledRecordHandlers() {
        for (Repo.Source s : repo.sources()) {
            if (!s.text().contains("import ")) {
                continue;
            }
            for (MethodDeclaration m : s.cu().findAll(MethodDeclaration.class)) {
                if (m.getBody().isEmpty()
                        || m.isPrivate()
                        || m.isStatic()
                        || m.getParameters().isEmpty()
                        || m.getParameters().size() > 3
                        || byBody.containsKey(m.getBody().get())
                        || insideEntry(m)) {
                    continue;
                }
                EntryCatalogue.Rule r = m.getParameters().stream()
                        .flatMap(p -> p.getType().findAll(ClassOrInterfaceType.class).stream())
                        .map(t -> CATALOGUE.record(t.getNameAsString(), s))
                        .flatMap(Optional::stream)
                        .findFirst()
                        .orElse(null);
                if (r == null
                        || m.getParameters().stream()
                                .anyMatch(p -> Types.simple(p.getType()).matches(".*(Exception|Throwable|Error)"))
                        || NOT_A_HANDLER_METHOD.matcher(m.getNameAsString()).matches()) {
                    continue;
                }
                boolean framework = m.getAnnotations().stream()
                        .anyMatch(a ->
                                !INCIDENTAL_ANNOTATIONS.contains(a.getName().getIdentifier()));
                if (!framework
                        && !HANDLER_METHOD.matcher(m.getNameAsString()).matches()
                        && !m.getNameAsString().matches("(listen|read|dispatch|accept|apply|execute|run)\\w*")) {
                    continue;
                }
                TypeDeclaration<?> owner = Types.enclosingType(m);
                // an abstract class's or interface's method runs under its subclasses, whose own finders list them
                if (!(owner instanceof ClassOrInterfaceDeclaration c)
                        || c.isInterface()
                        || c.isAbstract()
                        || NOT_A_HANDLER_CLASS.matcher(c.getNameAsString()).matches()
                        || calledInRepo(m.getNameAsString())) {
                    continue;
                }
                Entry e = add(s, r.kind(), r.broker(), owner(m), m, m.getBody().get(), m);
                e.ack = r.ack();
                e.ackCalls = r.ackCalls();
                e.ackText = r.why();
            }
        }
    }

    /** A pulling call: what it returns was taken from the broker for the caller to work on. */
    private static final Pattern PULL = Pattern.compile("poll\\w*|pull\\w*|receive\\w*|fetch\\w*|take");

    /** Calls that settle pulled messages: a commit of the position, an ack, a delete. */
    private static final Set<String> SETTLE =
            Set.of("commit", "commitSync", "commitAsync", "acknowledge", "ack", "deleteMessage", "complete");

    /**
     * A loop pulling a broker's own messages through a client the scan has no finder for ({@code List<MessageExt>
     * messages = pullConsumer.poll(…)} on RocketMQ's lite pull consumer or a project's wrapper of it, {@code for
     * (Message m : receiver.receiveBatch(…))}): the pulled value is declared as, or iterated as, a type of the
     * catalogue's {@code record} lines. The loop is the consumer; a commit, ack or delete in it settles what it pulled,
     * and without one the client's position moves on with the next pull, after the loop's work on the last.
     */
    private void recordPullLoops() {
        for (Repo.Source s : repo.sources()) {
            for (MethodCallExpr call : s.cu().findAll(MethodCallExpr.class)) {
                if (call.getScope().isEmpty() || call.getScope().get().isThisExpr()) {
                    continue;
                }
                boolean named = PULL.matcher(call.getNameAsString()).matches();
                if (named && insideEntry(call)) {
                    continue;
                }
                com.github.javaparser.ast.type.Type pulled = null;
                Node parent = call.getParentNode().orElse(null);
                if (parent instanceof VariableDeclarator v && v.getInitializer().orElse(null) == call) {
                    pulled = v.getType();
                } else if (parent instanceof ForEachStmt fe && fe.getIterable() == call) {
                    pulled = fe.getVariable().getElementType();
                }
                if (pulled == null) {
                    continue;
                }
                EntryCatalogue.Rule r = pulled.findAll(ClassOrInterfaceType.class).stream()
                        .map(t -> CATALOGUE.record(t.getNameAsString(), s))
                        .flatMap(Optional::stream)
                        .findFirst()
                        .orElse(null);
                if (r == null) {
                    continue;
                }
                Node body = loopOrMethod(call);
                MethodDeclaration m =
                        Types.ancestor(call, MethodDeclaration.class).orElse(null);
                if (body == null
                        || m == null
                        || body == m.getBody().orElse(null)
                        // a method of any other name, only once the record type says it pulls (resolving the wrapper
                        // costs a type look-up)
                        || !named && (insideEntry(call) || !wrapsPoll(call))) {
                    continue;
                }
                Entry e = add(s, r.kind() + " pull loop", r.broker(), owner(call), call, body, call);
                e.loop = true;
                if (body.findAll(MethodCallExpr.class).stream().anyMatch(c -> SETTLE.contains(c.getNameAsString()))) {
                    e.ack = Entry.Ack.EXPLICIT;
                    e.ackCalls = SETTLE;
                    e.ackText = "the loop settles what it pulled (commit, ack or delete); what is not settled is pulled"
                            + " again after a crash";
                } else {
                    e.ackText = "the client moves its position on with the next pull, after the loop's work on the"
                            + " last one: a crash in that work pulls it again";
                }
            }
        }
    }

    /**
     * A pull whose name says it takes messages: the broker verbs, or a get naming what a broker hands out ({@code
     * getWithoutAck}, {@code getMessage}, {@code getBatch}); a plain {@code get} reads a value.
     */
    private static final Pattern SETTLED_PULL = Pattern.compile(
            "(?:poll|pull|receive|fetch|take)\\w*|get(?:WithoutAck|Messages?|Batch|Records|Events)(?:WithoutAck)?");

    /**
     * What settles a pull on the client it came from: an ack, a commit of the position. A delete settles only when it
     * names a message (a queue's {@code deleteMessage(receipt)}): a delete of a row read from the project's own
     * table is the table's business, not a broker's.
     */
    private static final Pattern SETTLED_BY =
            Pattern.compile("ack\\w*|acknowledge\\w*|commit\\w*|delete\\w*Messages?\\w*");

    /** In-process collections: taking from them pulls nothing from a broker, whatever is done after. */
    private static final Set<String> IN_PROCESS = Set.of(
            "Queue",
            "Deque",
            "BlockingQueue",
            "BlockingDeque",
            "TransferQueue",
            "ArrayBlockingQueue",
            "LinkedBlockingQueue",
            "LinkedBlockingDeque",
            "LinkedTransferQueue",
            "PriorityBlockingQueue",
            "DelayQueue",
            "SynchronousQueue",
            "ConcurrentLinkedQueue",
            "ConcurrentLinkedDeque",
            "ArrayDeque",
            "PriorityQueue",
            "LinkedList",
            "List",
            "ArrayList",
            "Map",
            "Iterator",
            "ListIterator",
            "CompletionService",
            "ExecutorCompletionService",
            "Optional",
            "Future",
            "CompletableFuture",
            "Stream");

    /**
     * A loop that pulls from a client and acknowledges, on that same client or on what the pull returned, is a
     * consumer, whatever the client: Canal's {@code message = connector.getWithoutAck(n)} … {@code
     * connector.ack(message.getId())}, a project's SPI ({@code consumer.getMessage(…)} … {@code consumer.ack()}), an
     * in-house queue ({@code tasks = client.pullTasks(q, 25)} … {@code client.acknowledge(task.leaseId())}), an
     * envelope acked by itself ({@code env = inbox.receive(…)} … {@code env.ack()}). The pair is what a broker client
     * is: a read that leaves the message the client's until it is settled, and the settling call. Either half alone is
     * ordinary code (a queue's {@code take}, a transaction's {@code commit} on another object, an iterator's {@code
     * next}), and so is a read then a delete of the project's own rows. Run after every finder, so a client one of
     * them names keeps its own kind and settings.
     */
    private void settledPullLoops() {
        for (Repo.Source s : repo.sources()) {
            for (MethodCallExpr call : s.cu().findAll(MethodCallExpr.class)) {
                if (call.getScope().isEmpty()
                        || call.getScope().get().isThisExpr()
                        || call.getScope().get().isSuperExpr()
                        || !SETTLED_PULL.matcher(call.getNameAsString()).matches()
                        || insideEntry(call)) {
                    continue;
                }
                Set<String> pulled = pulledNames(call);
                if (pulled.isEmpty()) {
                    continue;
                }
                Node body = settledLoop(call);
                if (body == null) {
                    continue;
                }
                String client = receiverText(call.getScope().get());
                String clientType = types.typeOf(call.getScope().get());
                if (clientType != null && IN_PROCESS.contains(clientType)
                        // a client outlives the loop: a receiver declared in it is a value the loop works on (a
                        // message's getMessages(), a record's fetch…)
                        || declaredIn(body, rootName(call.getScope().get()))) {
                    continue;
                }
                derive(body, pulled);
                int from = call.getBegin().map(p -> p.line).orElse(0);
                Set<String> settles = new java.util.TreeSet<>();
                for (MethodCallExpr c : body.findAll(MethodCallExpr.class)) {
                    if (c == call
                            || c.getScope().isEmpty()
                            || !SETTLED_BY.matcher(c.getNameAsString()).matches()
                            || c.getBegin().map(p -> p.line).orElse(0) < from) {
                        continue;
                    }
                    Expression scope = c.getScope().get();
                    if (client.equals(receiverText(scope)) || pulled.contains(rootName(scope))) {
                        settles.add(c.getNameAsString());
                    }
                }
                if (settles.isEmpty() || !pullsFromOutside(clientType, call)) {
                    continue;
                }
                String owner = clientType != null ? clientType : client;
                Entry e = add(
                        s, owner + "." + call.getNameAsString() + " pull loop", "queue", owner(call), call, body, call);
                e.loop = true;
                e.ack = Entry.Ack.EXPLICIT;
                e.ackCalls = Set.copyOf(settles);
                e.ackText = "the loop settles what it pulled (" + String.join("/", settles) + " on " + client
                        + " or on what it returned); what is not settled is pulled again after a crash";
            }
        }
    }

    /**
     * The pull reaches past the repository: a library's client, a repository interface no class here implements (an
     * SPI whose providers ship apart), or the project's wrapper whose method itself pulls from a client. A method of
     * the project's own that reads its tables (a DAO's {@code fetchUnexported}), or a Spring Data repository, hands
     * out rows, not messages.
     */
    private boolean pullsFromOutside(String clientType, MethodCallExpr call) {
        if (clientType == null || !types.isRepoType(clientType)) {
            return true;
        }
        if (types.isSpringDataRepository(clientType)) {
            return false;
        }
        List<MethodDeclaration> ms = repo.methods(
                clientType, call.getNameAsString(), call.getArguments().size(), call);
        List<MethodDeclaration> bodies =
                ms.stream().filter(m -> m.getBody().isPresent()).toList();
        return bodies.isEmpty()
                || bodies.stream()
                        .anyMatch(m -> m.findFirst(
                                        MethodCallExpr.class,
                                        c -> c.getScope()
                                                        .filter(x -> !x.isThisExpr())
                                                        .isPresent()
                                                && SETTLED_PULL
                                                        .matcher(c.getNameAsString())
                                                        .matches())
                                .isPresent());
    }

    /** What the pull's result is held in: the variable it initialises or is assigned to, or the loop variable over it. */
    private static Set<String> pulledNames(MethodCallExpr call) {
        Set<String> names = new java.util.HashSet<>();
        Node parent = call.getParentNode().orElse(null);
        if (parent instanceof VariableDeclarator v && v.getInitializer().orElse(null) == call) {
            names.add(v.getNameAsString());
        } else if (parent instanceof com.github.javaparser.ast.expr.AssignExpr a
                && a.getValue() == call
                && a.getTarget() instanceof NameExpr n) {
            names.add(n.getNameAsString());
        } else if (parent instanceof ForEachStmt fe && fe.getIterable() == call) {
            names.add(fe.getVariable().getVariables().get(0).getNameAsString());
        }
        return names;
    }

    /**
     * The loop around the pull; a for-each over the pull itself when no loop encloses it (a scheduled drain pulls once
     * per run and works through what it pulled).
     */
    private static Node settledLoop(MethodCallExpr call) {
        Node body = loopOrMethod(call);
        if (body instanceof WhileStmt
                || body instanceof ForStmt
                || body instanceof DoStmt
                || body instanceof ForEachStmt) {
            return body;
        }
        return call.getParentNode().filter(ForEachStmt.class::isInstance).orElse(null);
    }

    /** Adds what is computed from the pulled names in the loop: its for-each variables and local variables. */
    private static void derive(Node body, Set<String> pulled) {
        for (int round = 0; round < 3; round++) {
            int before = pulled.size();
            for (ForEachStmt fe : body.findAll(ForEachStmt.class)) {
                if (mentions(fe.getIterable(), pulled)) {
                    pulled.add(fe.getVariable().getVariables().get(0).getNameAsString());
                }
            }
            for (VariableDeclarator v : body.findAll(VariableDeclarator.class)) {
                if (v.getInitializer().filter(i -> mentions(i, pulled)).isPresent()) {
                    pulled.add(v.getNameAsString());
                }
            }
            if (pulled.size() == before) {
                return;
            }
        }
    }

    private static boolean declaredIn(Node body, String name) {
        return name != null
                && (body.findFirst(
                                        VariableDeclarator.class,
                                        v -> v.getNameAsString().equals(name))
                                .isPresent()
                        || body.findFirst(
                                        com.github.javaparser.ast.body.Parameter.class,
                                        p -> p.getNameAsString().equals(name))
                                .isPresent());
    }

    private static boolean mentions(Node n, Set<String> names) {
        return n instanceof NameExpr x && names.contains(x.getNameAsString())
                || n.findFirst(NameExpr.class, x -> names.contains(x.getNameAsString()))
                        .isPresent();
    }

    /** The receiver as written, {@code this.} dropped: {@code this.consumer} and {@code consumer} are one client. */
    private static String receiverText(Expression scope) {
        String t = scope.toString();
        return t.startsWith("this.") ? t.substring(5) : t;
    }

    /** The variable a receiver chain starts from ({@code task} in {@code task.lease().ack()}), or null. */
    private static String rootName(Expression scope) {
        Expression at = scope;
        while (true) {
            if (at instanceof NameExpr n) {
                return n.getNameAsString();
            }
            if (at instanceof MethodCallExpr mc && mc.getScope().isPresent()) {
                at = mc.getScope().get();
            } else if (at instanceof FieldAccessExpr fa) {
                at = fa.getScope();
            } else if (at instanceof EnclosedExpr en) {
                at = en.getInner();
            } else if (at instanceof CastExpr ce) {
                at = ce.getExpression();
            } else {
                return null;
            }
        }
    }

    /**
     * The call runs a method of the project's own Kafka wrapper that polls its consumer and hands back what it polled,
     * whatever the method is named ({@code source.next()}, {@code reader.records()}): the caller's loop consumes.
     */
    private boolean wrapsPoll(MethodCallExpr call) {
        String owner = types.typeOf(call.getScope().get());
        if (owner == null || !types.isRepoType(owner)) {
            return false;
        }
        for (TypeDeclaration<?> t : repo.types(owner, call)) {
            for (MethodDeclaration m : t.getMethodsByName(call.getNameAsString())) {
                if (m.getParameters().size() == call.getArguments().size()
                        && m.findAll(MethodCallExpr.class).stream()
                                .anyMatch(p -> p.getNameAsString().equals("poll")
                                        && p.getScope()
                                                .map(types::typeOf)
                                                .filter(KAFKA_CONSUMER_TYPES::contains)
                                                .isPresent())) {
                    return true;
                }
            }
        }
        return false;
    }

    /** A call of a method by this name in some file of the repository, on an object, by reference, or unqualified. */
    private static final Pattern CALL =
            Pattern.compile("(?:\\.|::|->|[=(,;{}!&|?:]|\\breturn|\\bthrow)\\s*([a-z_$][\\w$]*)\\s*[(;),]");

    /**
     * The method is called by name somewhere in the repository ({@code .name(}, {@code ::name}, {@code name(} after a
     * statement's start, an operator or a lambda's arrow): its callers run it, not a broker. By name only, so a method whose name some
     * other call shares counts as called (a miss, never a consumer too many).
     */
    private boolean calledInRepo(String name) {
        if (calledNames == null) {
            calledNames = new java.util.HashSet<>();
            Matcher c = CALL.matcher("");
            for (Repo.RawFile f : repo.rawFiles()) {
                c.reset(f.text());
                while (c.find()) {
                    calledNames.add(c.group(1));
                }
            }
        }
        return calledNames.contains(name);
    }

    /** The node lies in the body of a consumer already listed (a reference passed on inside a poll loop). */
    private boolean insideEntry(Node n) {
        for (Node at = n; at != null; at = at.getParentNode().orElse(null)) {
            if (byBody.containsKey(at)) {
                return true;
            }
        }
        return false;
    }

    private static String brokerOf(String word) {
        return switch (word) {
            case "Rabbit", "Amqp" -> "rabbitmq";
            case "JMS" -> "jms";
            case "SQS" -> "sqs";
            case "PubSub" -> "pubsub";
            default -> word.toLowerCase(Locale.ROOT);
        };
    }

    /** Handler methods of a class the catalogue names: by their annotation, or by the interface the class implements. */
    private static List<String> supertypeNames(ClassOrInterfaceDeclaration c) {
        List<String> out = new ArrayList<>();
        c.getImplementedTypes().forEach(t -> out.add(t.getNameAsString()));
        c.getExtendedTypes().forEach(t -> out.add(t.getNameAsString()));
        return out;
    }

    /** The library types whose implementations the finders list: listener and handler interfaces, route builders. */
    private static final Pattern HANDLER_SUPERTYPE = Pattern.compile(
            "RequestHandler|RequestStreamHandler|Worker|JobHandler|ShardRecordProcessor|IRecordProcessor"
                    + "|IShardRecordProcessor|StreamsRecordProcessor|RocketMQListener|RocketMQReplyListener"
                    + "|MessageReceiver|MessageReceiverWithAckResponse|DefaultConsumer|ContextualProcessor"
                    + "|ContextualFixedKeyProcessor|AbstractProcessor|\\w*MessageListener|\\w*RouteBuilder");

    static boolean handlerSupertype(String simpleName) {
        return HANDLER_SUPERTYPE.matcher(simpleName).matches()
                || STREAMS_CALLBACKS.containsKey(simpleName)
                || CATALOGUE.names(EntryCatalogue.Shape.IMPLEMENTS, simpleName);
    }

    /**
     * The library types a concrete class implements or extends through the repository's own classes and interfaces
     * (not those it names itself), with the type variables its bases declare bound to what the class passes them:
     * {@code OrderHandler extends SqsHandler<Order>} where {@code SqsHandler<T> implements RequestHandler<SQSEvent,
     * Void>}, or {@code Impl extends Base<SQSEvent, Void>} where {@code Base<I, O> implements RequestHandler<I, O>}.
     */
    private void inheritedLibraryTypes(
            ClassOrInterfaceDeclaration c,
            Map<String, com.github.javaparser.ast.type.Type> bound,
            List<ClassOrInterfaceType> implemented,
            List<ClassOrInterfaceType> extended,
            Set<String> seen,
            int depth) {
        if (depth > 6 || !seen.add(c.getNameAsString())) {
            return;
        }
        List<ClassOrInterfaceType> supers = new ArrayList<>(c.getImplementedTypes());
        supers.addAll(c.getExtendedTypes());
        for (ClassOrInterfaceType st : supers) {
            ClassOrInterfaceType t = bind(st, bound);
            ClassOrInterfaceDeclaration base = repo.types(t.getNameAsString(), c).stream()
                    .filter(ClassOrInterfaceDeclaration.class::isInstance)
                    .map(ClassOrInterfaceDeclaration.class::cast)
                    .filter(b -> b != c)
                    .findFirst()
                    .orElse(null);
            if (base == null) {
                if (depth > 0) {
                    // an interface's supertypes are implemented; a class's extended type is extended
                    (c.isInterface() || c.getImplementedTypes().contains(st) ? implemented : extended).add(t);
                }
                continue;
            }
            Map<String, com.github.javaparser.ast.type.Type> next = new HashMap<>();
            var params = base.getTypeParameters();
            var args = t.getTypeArguments().orElse(null);
            if (args != null && args.size() == params.size()) {
                for (int i = 0; i < params.size(); i++) {
                    next.put(params.get(i).getNameAsString(), args.get(i));
                }
            }
            inheritedLibraryTypes(base, next, implemented, extended, seen, depth + 1);
        }
    }

    /** {@code t} with the type variables {@code bound} names replaced by what they are bound to (a detached copy). */
    private static ClassOrInterfaceType bind(
            ClassOrInterfaceType t, Map<String, com.github.javaparser.ast.type.Type> bound) {
        if (bound.isEmpty() || t.getTypeArguments().isEmpty()) {
            return t;
        }
        ClassOrInterfaceType copy = t.clone();
        var args = copy.getTypeArguments().get();
        for (int i = 0; i < args.size(); i++) {
            com.github.javaparser.ast.type.Type a = args.get(i);
            if (a.isClassOrInterfaceType()
                    && a.asClassOrInterfaceType().getScope().isEmpty()
                    && bound.containsKey(a.asClassOrInterfaceType().getNameAsString())) {
                args.set(
                        i,
                        bound.get(a.asClassOrInterfaceType().getNameAsString()).clone());
            }
        }
        return copy;
    }

    private void catalogued(Repo.Source s, ClassOrInterfaceDeclaration c) {
        for (MethodDeclaration m : c.getMethods()) {
            if (m.getBody().isEmpty()) {
                continue;
            }
            // an annotation on the method, or on one of its parameters (an Azure Functions trigger binds a parameter)
            List<AnnotationExpr> anns = new ArrayList<>(withMeta(m.getAnnotations()));
            m.getParameters().forEach(p -> anns.addAll(p.getAnnotations()));
            for (AnnotationExpr a : anns) {
                String n = a.getName().getIdentifier();
                if (CATALOGUE.names(EntryCatalogue.Shape.ANNOTATION, n)) {
                    CATALOGUE
                            .match(EntryCatalogue.Shape.ANNOTATION, n, s)
                            .ifPresent(r -> catalogueEntry(
                                    s, r, owner(m), m, m.getBody().get(), m));
                }
            }
        }
        catalogueImplemented(s, c, supertypeNames(c));
    }

    /** A class implementing or extending catalogued library types: the handler methods the catalogue names. */
    private void catalogueImplemented(Repo.Source s, ClassOrInterfaceDeclaration c, List<String> supertypes) {
        // a library's abstract base class (Kafka Connect's SinkTask) is a supertype like an interface
        for (String n : supertypes) {
            if (!CATALOGUE.names(EntryCatalogue.Shape.IMPLEMENTS, n)) {
                continue;
            }
            CATALOGUE.match(EntryCatalogue.Shape.IMPLEMENTS, n, s).ifPresent(r -> {
                for (MethodDeclaration m : c.getMethodsByName(r.method())) {
                    m.getBody().ifPresent(b -> catalogueEntry(s, r, owner(m), m, b, m));
                }
            });
        }
    }

    /**
     * The handler a catalogued registration call is given: a lambda, an anonymous class's handler method, or a
     * {@code this::method} reference to a method of the calling class.
     */
    private void catalogueCallback(Repo.Source s, EntryCatalogue.Rule r, MethodCallExpr call) {
        int before = entries.size();
        callbackHandlers(s, r, call);
        Node built = call.findAncestor(Statement.class).orElse(null);
        if (r.ack() == Entry.Ack.AFTER_RETURN
                && built != null
                && AUTO_COMPLETE_OFF.matcher(built.toString()).matches()) {
            // the client built around the callback leaves completion to it: complete/dead-letter is the ack
            for (Entry e : entries.subList(before, entries.size())) {
                e.ack = Entry.Ack.EXPLICIT;
                e.ackCalls = Set.of("complete", "deadLetter", "completeMessage", "deadLetterMessage");
                e.ackText = "auto-complete disabled: the handler settles the message (complete/deadLetter); one it does"
                        + " not settle before its lock expires is redelivered";
            }
        }
    }

    private static final Pattern AUTO_COMPLETE_OFF =
            Pattern.compile("(?s).*(disableAutoComplete\\(\\)|setAutoComplete\\(false\\)|autoComplete\\(false\\)).*");

    private void callbackHandlers(Repo.Source s, EntryCatalogue.Rule r, MethodCallExpr call) {
        for (Expression arg : call.getArguments()) {
            Expression x = unwrapped(arg);
            if (x instanceof LambdaExpr l) {
                catalogueEntry(s, r, owner(call) + " " + call.getNameAsString(), l, l.getBody(), l);
            } else if (x instanceof ObjectCreationExpr oc
                    && oc.getAnonymousClassBody().isPresent()
                    && r.method() != null) {
                for (var member : oc.getAnonymousClassBody().get()) {
                    if (member instanceof MethodDeclaration md
                            && md.getNameAsString().equals(r.method())
                            && md.getBody().isPresent()) {
                        catalogueEntry(
                                s,
                                r,
                                owner(call) + " " + call.getNameAsString(),
                                md,
                                md.getBody().get(),
                                md);
                    }
                }
            } else if (x instanceof MethodReferenceExpr ref && selfReference(ref)) {
                TypeDeclaration<?> owner = Types.enclosingType(call);
                if (owner != null) {
                    for (MethodDeclaration target : owner.getMethodsByName(ref.getIdentifier())) {
                        target.getBody().ifPresent(b -> catalogueEntry(s, r, owner(target), target, b, target));
                    }
                }
            } else if (x instanceof MethodReferenceExpr ref) {
                // a bean's method (processMessage(messageHandler::processMessage), the handler injected into the
                // @Bean method that builds the client): the handler is that class's method, listed where it is
                Expression scope = ref.getScope();
                String type = scope.isTypeExpr()
                                && Character.isLowerCase(scope.toString().charAt(0))
                        ? Optional.ofNullable(types.declaredType(scope, scope.toString()))
                                .map(Types::simple)
                                .orElse(null)
                        : scope.isTypeExpr()
                                // a static method of a class (Handlers::onMessage)
                                ? Types.simple(scope.asTypeExpr().getType())
                                : types.typeOf(scope);
                if (type == null) {
                    continue;
                }
                for (TypeDeclaration<?> td : repo.types(type, call)) {
                    for (MethodDeclaration target : td.getMethodsByName(ref.getIdentifier())) {
                        target.getBody().ifPresent(b -> {
                            Entry e = catalogueEntry(s, r, owner(target), target, b, target);
                            e.source = repo.sourceOf(target);
                        });
                    }
                }
            }
        }
    }

    /**
     * A lambda held in a field or variable of a catalogued callback interface, or of a {@code Supplier} of one
     * ({@code Supplier<ExternalTaskHandler> handler = () -> (task, service) -> …}): the innermost lambda is the handler.
     */
    private void catalogueVariable(Repo.Source s, VariableDeclarator v) {
        if (!v.getType().isClassOrInterfaceType() || v.getInitializer().isEmpty()) {
            return;
        }
        ClassOrInterfaceType t = v.getType().asClassOrInterfaceType();
        boolean supplier = t.getNameAsString().equals("Supplier");
        if (supplier) {
            var args = t.getTypeArguments().orElse(null);
            if (args == null || args.size() != 1 || !args.get(0).isClassOrInterfaceType()) {
                return;
            }
            t = args.get(0).asClassOrInterfaceType();
        }
        String n = t.getNameAsString();
        if (!CATALOGUE.names(EntryCatalogue.Shape.IMPLEMENTS, n)
                || !(v.getInitializer().get() instanceof LambdaExpr outer)) {
            return;
        }
        LambdaExpr l = outer;
        if (supplier) {
            Expression inner = outer.getExpressionBody().orElse(null);
            if (!(inner instanceof LambdaExpr il)) {
                return;
            }
            l = il;
        }
        LambdaExpr handler = l;
        CATALOGUE
                .match(EntryCatalogue.Shape.IMPLEMENTS, n, s)
                .ifPresent(r -> catalogueEntry(
                        s, r, owner(v) + " " + v.getNameAsString(), handler, handler.getBody(), handler));
    }

    /**
     * A pulling call the catalogue names on a receiver of its type ({@code jmsTemplate.receiveAndConvert(q)},
     * {@code pubSubTemplate.pull(…)}): the loop around it, or its method, is the consumer. One acknowledged as it
     * returns (AUTO) is acknowledged at the call, before the work after it.
     */
    private void catalogueReceive(Repo.Source s, MethodCallExpr call) {
        String type = call.getScope().map(types::typeOf).orElse(null);
        if (type == null) {
            return;
        }
        for (EntryCatalogue.Rule r : CATALOGUE.all(EntryCatalogue.Shape.RECEIVE, call.getNameAsString(), s)) {
            if (!type.matches(r.method())) {
                continue;
            }
            Node body = loopOrMethod(call);
            MethodDeclaration m = Types.ancestor(call, MethodDeclaration.class).orElse(null);
            if (body == null || m == null) {
                return;
            }
            Entry e = add(s, r.kind(), r.broker(), owner(call), call, body, call);
            e.loop = body != m.getBody().orElse(null);
            e.ack = r.ack();
            e.ackCalls = r.ackCalls();
            e.ackText = r.why();
            if (r.ack() == Entry.Ack.AUTO && transacted(s.module())) {
                // a session- or channel-transacted template acknowledges with the transaction's commit
                e.ack = Entry.Ack.AFTER_RETURN;
                e.ackText = r.kind() + " in a transacted session: acknowledged when the transaction commits";
            } else if (r.ack() == Entry.Ack.AUTO) {
                e.ackSetting = e.location;
            }
            return;
        }
    }

    /** The module makes its JMS session or Rabbit channel transacted (setSessionTransacted(true), setChannelTransacted(true)). */
    private boolean transacted(Path module) {
        return repo.sources().stream()
                .anyMatch(o -> o.module().equals(module)
                        && o.text().replace(" ", "").matches("(?s).*(Session|Channel)Transacted\\(true\\).*"));
    }

    private Entry catalogueEntry(Repo.Source s, EntryCatalogue.Rule r, String name, Node decl, Node body, Node at) {
        Entry found = byBody.get(body);
        if (found != null) {
            return found; // a finder that knows the registration (a JetStream subscribe) has read its settings
        }
        Entry e = add(s, r.kind(), r.broker(), name, decl, body, at);
        e.ack = r.ack();
        e.ackCalls = r.ackCalls();
        e.ackText = r.why();
        return e;
    }

    // ---- Camel routes ---------------------------------------------------------------------------

    private void camel(Repo.Source s, ClassOrInterfaceDeclaration c) {
        if (!routeBuilder(c, 0)) {
            return;
        }
        camelRoutes(s, c);
    }

    /**
     * A route a {@code LambdaRouteBuilder} sets up ({@code rb -> rb.from("kafka:…")…}, a {@code @Bean} or
     * {@code RouteBuilder.addRoutes(context, rb -> …)}): {@code from} on the lambda's parameter.
     */
    private void camelLambdaRoute(Repo.Source s, MethodCallExpr from) {
        if (from.getArguments().isEmpty()
                || !(from.getScope().orElse(null) instanceof NameExpr builder)
                || s.cu().getImports().stream()
                        .noneMatch(i -> i.getNameAsString().startsWith("org.apache.camel"))) {
            return;
        }
        Types.ancestor(from, LambdaExpr.class)
                .filter(l -> l.getParameters().size() == 1
                        && l.getParameter(0).getNameAsString().equals(builder.getNameAsString()))
                .ifPresent(l -> camelRoute(s, from));
    }

    /** A class extending Camel's {@code RouteBuilder} (or {@code EndpointRouteBuilder}), directly or through its bases. */
    private boolean routeBuilder(ClassOrInterfaceDeclaration c, int depth) {
        for (ClassOrInterfaceType t : c.getExtendedTypes()) {
            if (t.getNameAsString().endsWith("RouteBuilder")) {
                return true;
            }
            if (depth < 5) {
                for (TypeDeclaration<?> up : repo.types(t.getNameAsString(), c)) {
                    if (up instanceof ClassOrInterfaceDeclaration uc && uc != c && routeBuilder(uc, depth + 1)) {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    /**
     * The routes set up in {@code scope} (a route builder's class or anonymous body, a {@code LambdaRouteBuilder}'s
     * lambda) that start from a broker: one consumer per {@code from}, its statement the route.
     */
    private void camelRoutes(Repo.Source s, Node scope) {
        for (MethodCallExpr from : scope.findAll(
                MethodCallExpr.class,
                mc -> (mc.getNameAsString().equals("from")
                                || mc.getNameAsString().equals("fromF"))
                        && mc.getArguments().size() >= 1)) {
            camelRoute(s, from);
        }
    }

    private void camelRoute(Repo.Source s, MethodCallExpr from) {
        String uri = camelUri(s, from.getArgument(0));
        if (uri == null) {
            routeHelperCalls(from);
            return;
        }
        if (!camelBroker(uri)) {
            return;
        }
        Statement stmt = Types.ancestor(from, Statement.class).orElse(null);
        if (stmt == null) {
            return;
        }
        Entry e = add(
                s,
                "Camel route from(" + uri.split("[:?]")[0] + ":…)",
                "camel",
                owner(from) + " route",
                from,
                stmt,
                from);
        e.ackText = "the Camel consumer acknowledges after the route completes";
        // a .transacted() route from a JMS endpoint in a module running a JTA transaction manager: the receive and
        // the route's writes through the module's XA resources commit or roll back together, as a @JmsListener's do
        MethodCallExpr transacted =
                stmt.findAll(MethodCallExpr.class, c -> c.getNameAsString().equals("transacted")).stream()
                        .findFirst()
                        .orElse(null);
        if (transacted != null && CAMEL_JMS.matcher(uri).matches()
                || transacted != null && camelComponents().contains(uri.substring(0, Math.max(0, uri.indexOf(':'))))) {
            if (jtaManager(s) != null) {
                e.jtaTransaction = repo.loc(transacted);
            }
        }
    }

    /**
     * A route the project builds in a helper from the URI its caller passes ({@code addRoutesToCamelContext(context,
     * uri, routeId, bean, method)}, whose anonymous builder is {@code from(uri)…}): one consumer per call whose argument
     * names a broker, at the call, since the call says which queue is read. The helper's route is the same for every
     * caller, so each entry's statement is its call, and the helper itself is no consumer.
     */
    private void routeHelperCalls(MethodCallExpr from) {
        if (!(from.getArgument(0) instanceof NameExpr param)) {
            return;
        }
        MethodDeclaration helper = null;
        int index = -1;
        for (Node up = from.getParentNode().orElse(null);
                up != null && helper == null;
                up = up.getParentNode().orElse(null)) {
            if (up instanceof MethodDeclaration m) {
                for (int i = 0; i < m.getParameters().size(); i++) {
                    if (m.getParameter(i).getNameAsString().equals(param.getNameAsString())) {
                        helper = m;
                        index = i;
                    }
                }
            }
        }
        Statement route = Types.ancestor(from, Statement.class).orElse(null);
        if (helper == null
                || route == null
                || !(Types.enclosingType(helper) instanceof ClassOrInterfaceDeclaration owner)) {
            return;
        }
        String name = helper.getNameAsString();
        int arity = helper.getParameters().size();
        repo.parseHolding(List.of(name + "(")); // the callers: files the scan had no reason to parse yet
        for (Repo.Source caller : repo.sources()) {
            if (!caller.text().contains(name + "(")) {
                continue;
            }
            for (MethodCallExpr call : caller.cu()
                    .findAll(
                            MethodCallExpr.class,
                            c -> c.getNameAsString().equals(name)
                                    && c.getArguments().size() == arity)) {
                if (call.getScope().isPresent()) {
                    String type = types.typeOf(call.getScope().get());
                    if (type != null && !type.equals(owner.getNameAsString())) {
                        continue; // another class's method of the same name
                    }
                } else if (Types.enclosingType(call) != owner) {
                    continue;
                }
                String uri = camelUri(caller, call.getArgument(index));
                if (uri == null || !camelBroker(uri)) {
                    continue;
                }
                // listed at the call, traced through the helper's route (the same statement for every caller)
                Entry e = new Entry();
                e.kind = "Camel route from(" + uri.split("[:?]")[0] + ":…) built by " + name;
                e.broker = "camel";
                e.location = repo.loc(call);
                e.name = owner(call) + " route @" + e.location.line();
                e.decl = from;
                e.body = route;
                e.source = repo.sourceOf(from);
                e.ackText = "the Camel consumer acknowledges after the route " + name + " builds completes";
                entries.add(e);
            }
        }
    }

    /** The JMS family of Camel endpoints, whose consumer a route's {@code .transacted()} runs in the JMS transaction. */
    private static final Pattern CAMEL_JMS = Pattern.compile("^(jms|activemq|activemq6|sjms2?|amqp):.*");

    // ---- Eventuate and Spring Cloud Stream -----------------------------------------------------

    /** Eventuate handlers a method of a file that builds them ({@code HandlersBuilder}) registers. */
    private void eventuate(Repo.Source s, MethodDeclaration m) {
        String text = m.getBody().map(Object::toString).orElse("");
        if (!text.contains("DomainEventHandlersBuilder") && !text.contains("CommandHandlersBuilder")) {
            return;
        }
        for (MethodCallExpr on : m.findAll(
                MethodCallExpr.class,
                mc -> (mc.getNameAsString().equals("onEvent")
                                || mc.getNameAsString().equals("onMessage")
                                || mc.getNameAsString().equals("onReply"))
                        && mc.getArguments().size() >= 2)) {
            Expression h = on.getArgument(on.getArguments().size() - 1);
            TypeDeclaration<?> owner = Types.enclosingType(m);
            if (h instanceof MethodReferenceExpr ref && owner != null) {
                for (MethodDeclaration target : owner.getMethodsByName(ref.getIdentifier())) {
                    target.getBody()
                            .ifPresent(b -> eventuateDedupe(add(
                                    s,
                                    "Eventuate " + on.getNameAsString() + " handler",
                                    "eventuate",
                                    owner(target),
                                    target,
                                    b,
                                    target)));
                }
            } else if (h instanceof LambdaExpr l) {
                eventuateDedupe(add(
                        s,
                        "Eventuate " + on.getNameAsString() + " handler",
                        "eventuate",
                        owner(m) + " lambda",
                        l,
                        l.getBody(),
                        l));
            }
        }
    }

    private void eventuateDedupe(Entry e) {
        e.ackText = "Eventuate commits the offset after the handler's transaction";
        Location noop = noopDetector.get(e.source.module());
        if (noop != null) {
            e.framework = Entry.Framework.DISABLED;
            e.frameworkText =
                    "NoopDuplicateMessageDetector: Eventuate's duplicate detection is switched off in this service";
            e.frameworkLocation = noop;
        } else {
            e.framework = Entry.Framework.DATABASE;
            e.frameworkText = "Eventuate duplicate detector (received_messages, in the handler's transaction)";
        }
    }

    /** {@code @Bean MessageReceiver receiver() { return (message, consumer) -> …; }}: the lambda is the callback. */
    private void callbackBean(Repo.Source s, MethodDeclaration m) {
        // a @Bean, or any method whose declared type is the callback interface (a base class's getReceiver() handing
        // the Subscriber its MessageReceiver): the lambda it returns is what the client calls per message
        if (!m.getType().isClassOrInterfaceType()) {
            return;
        }
        String t = m.getType().asClassOrInterfaceType().getNameAsString();
        // a @Bean of a catalogued callback interface (an @ExternalTaskSubscription ExternalTaskHandler, a
        // ServiceBusRecordMessageListener): the lambda it returns is the handler. Only when the file imports that
        // library: a JMS MessageListener bean shares its simple name with RocketMQ 5's and is read below
        var catalogued = CATALOGUE.names(EntryCatalogue.Shape.IMPLEMENTS, t)
                ? CATALOGUE.match(EntryCatalogue.Shape.IMPLEMENTS, t, s)
                : java.util.Optional.<EntryCatalogue.Rule>empty();
        if (catalogued.isPresent()) {
            for (ReturnStmt ret : m.findAll(ReturnStmt.class)) {
                if (ret.getExpression().orElse(null) instanceof LambdaExpr l) {
                    catalogueEntry(s, catalogued.get(), owner(m), l, l.getBody(), l);
                }
            }
            return;
        }
        if (t.endsWith("MessageListener")
                && !t.equals("BatchMessageListener")
                && Types.annotated(m.getAnnotations(), "Bean")
                && listenerBroker(s) != null) {
            // @Bean MessageListener listener() { return message -> …; }: the bean a listener container is given
            for (ReturnStmt r : m.findAll(ReturnStmt.class)) {
                if (r.getExpression().orElse(null) instanceof LambdaExpr l) {
                    listened(add(s, t + " bean", listenerBroker(s), owner(m), l, l.getBody(), l));
                }
            }
            return;
        }
        if (!t.startsWith("MessageReceiver") && !STREAMS_CALLBACKS.containsKey(t)) {
            return;
        }
        for (ReturnStmt r : m.findAll(ReturnStmt.class)) {
            if (r.getExpression().orElse(null) instanceof LambdaExpr l) {
                callbackObject(s, t, l, l.getBody(), l);
            }
        }
    }

    private void lambda(Repo.Source s, MethodDeclaration m, Node b, String event, String kind) {
        Entry e = add(s, kind, "lambda", owner(m), m, b, m);
        e.ackText = LAMBDA_ASYNC_EVENTS.contains(event)
                ? "an asynchronous invocation: Lambda retries it when the handler fails, and may deliver"
                        + " an event more than once"
                : "Lambda deletes the batch when the handler returns; a failure redelivers all of it";
        e.loop = true;
        if (Types.annotated(m.getAnnotations(), "Idempotent")) {
            e.framework = Entry.Framework.ALL;
            e.frameworkText = "Powertools @Idempotent";
            e.frameworkLocation =
                    repo.loc(Types.annotation(m.getAnnotations(), "Idempotent").get());
        }
    }

    /**
     * A Lambda handler named in the function's configuration ({@code Handler: pkg.Orders::handle}) rather than
     * found through {@code RequestHandler}: any public method taking a queue or stream event and the Lambda
     * {@code Context}, the signature the runtime calls by name.
     */
    private void lambdaMethod(Repo.Source s, MethodDeclaration m) {
        if (!m.isPublic() || m.getParameters().size() != 2 || m.getBody().isEmpty()) {
            return;
        }
        String event = Types.simple(m.getParameter(0).getType());
        if (event.equals("Map") && mapEnvelope(m) != null) {
            event = mapEnvelope(m);
        }
        if (!LAMBDA_EVENTS.contains(event)
                || !m.getParameter(1).getType().asString().endsWith("Context")
                || s.cu().getImports().stream()
                        .noneMatch(i -> i.getNameAsString().startsWith("com.amazonaws.services.lambda"))) {
            return;
        }
        lambda(s, m, m.getBody().get(), event, "Lambda handler(" + event + ")");
    }

    /**
     * A Lambda handler taking the event as a plain {@code Map} names its trigger by the envelope it reads: an
     * EventBridge rule's ({@code event.get("detail-type")}, {@code "detail"}) or an event source mapping's batch
     * ({@code "events"} of a DocumentDB change stream, {@code "Records"} of a queue or stream). Which rule or mapping
     * targets it is said only in the deployment template, but those envelopes are the triggers' alone. Null when it
     * reads none of them.
     */
    private static String mapEnvelope(MethodDeclaration m) {
        if (m.getParameters().size() != 2) {
            return null;
        }
        String event = m.getParameter(0).getNameAsString();
        for (MethodCallExpr c : m.findAll(
                MethodCallExpr.class,
                c -> c.getNameAsString().equals("get")
                        && c.getArguments().size() == 1
                        && c.getScope()
                                .filter(x -> x instanceof NameExpr ne
                                        && ne.getNameAsString().equals(event))
                                .isPresent()
                        && c.getArgument(0) instanceof StringLiteralExpr)) {
            String key = c.getArgument(0).asStringLiteralExpr().getValue();
            if (key.equals("detail-type") || key.equals("detail")) {
                return EVENTBRIDGE;
            }
            if (key.equals("events") || key.equals("Records")) {
                return SOURCE_BATCH;
            }
        }
        return null;
    }

    /**
     * The event a {@code RequestStreamHandler} reads from its input stream, when it says: a queue or stream event
     * type it deserialises ({@code mapper.readValue(input, SQSEvent.class)}), or the envelope's keys it reads
     * ({@code "Records"}, {@code "detail-type"}). Null for a handler that says neither (an API or direct invocation).
     */
    private static String streamEvent(MethodDeclaration m) {
        if (m.getParameters().size() != 3) {
            return null;
        }
        for (com.github.javaparser.ast.expr.ClassExpr c : m.findAll(com.github.javaparser.ast.expr.ClassExpr.class)) {
            String t = Types.simple(c.getType());
            if (LAMBDA_EVENTS.contains(t)) {
                return t;
            }
        }
        for (StringLiteralExpr lit : m.findAll(StringLiteralExpr.class)) {
            String key = lit.getValue();
            if (key.equals("detail-type")) {
                return EVENTBRIDGE;
            }
            if (key.equals("Records")) {
                return SOURCE_BATCH;
            }
        }
        return null;
    }

    /** The event name a {@code Map} handler reading the EventBridge envelope is listed under. */
    private static final String EVENTBRIDGE = "EventBridge event";

    /** The event name of a {@code Map} handler reading an event source mapping's batch (retried until it succeeds). */
    private static final String SOURCE_BATCH = "event source batch";

    /** Lambda event types of the queue and stream triggers: the batch is redelivered when the handler fails. */
    private static final Set<String> LAMBDA_EVENTS = Set.of(
            EVENTBRIDGE,
            SOURCE_BATCH,
            "ScheduledEvent",
            "SQSEvent",
            "KafkaEvent",
            "SNSEvent",
            "KinesisEvent",
            "DynamodbEvent",
            "ActiveMQEvent",
            "RabbitMQEvent",
            "S3Event",
            "S3EventNotification",
            "CloudWatchLogsEvent");

    /** Events Lambda delivers by asynchronous invocation: retried when the handler fails, sometimes delivered twice. */
    private static final Set<String> LAMBDA_ASYNC_EVENTS =
            Set.of("SNSEvent", "S3Event", "S3EventNotification", "CloudWatchLogsEvent", EVENTBRIDGE, "ScheduledEvent");

    /**
     * A Spring Cloud Function declared as a class: a {@code @Component} implementing {@code Consumer<T>} or
     * {@code Function<T, R>} is registered as a function bean under its bean name, and the binder calls its
     * {@code accept}/{@code apply} per message like a {@code @Bean} lambda's.
     */
    private void streamComponent(Repo.Source s, ClassOrInterfaceDeclaration c) {
        if (c.isInterface()
                || c.isAbstract()
                || !Types.annotated(c.getAnnotations(), "Component", "Service")
                || (!streamModules.containsKey(s.module()) && !settings.hasPrefix(s.module(), "spring.cloud.stream"))) {
            return;
        }
        for (ClassOrInterfaceType t : c.getImplementedTypes()) {
            String n = t.getNameAsString();
            String method = n.equals("Consumer") ? "accept" : n.equals("Function") ? "apply" : null;
            if (method == null || t.getTypeArguments().isEmpty()) {
                continue;
            }
            for (MethodDeclaration m : c.getMethodsByName(method)) {
                m.getBody().ifPresent(b -> {
                    Entry e = add(s, "Spring Cloud Stream " + n + " component", "stream", owner(m), m, b, m);
                    e.ackText = "the binder acknowledges after the function returns";
                });
            }
        }
    }

    private void stream(Repo.Source s, MethodDeclaration m) {
        if (!Types.annotated(m.getAnnotations(), "Bean")) {
            return;
        }
        String rt = Types.simple(m.getType());
        if (!rt.equals("Consumer") && !rt.equals("Function") && !rt.equals("BiConsumer")) {
            return;
        }
        // a Spring Cloud Function bean taking a Lambda trigger's event (the AWS adapter invokes it per batch)
        String event = m.getType() instanceof ClassOrInterfaceType ct
                ? ct.getTypeArguments()
                        .filter(a -> !a.isEmpty())
                        .map(a -> functionInput(a.get(0)))
                        .orElse("")
                : "";
        if (LAMBDA_EVENTS.contains(event)) {
            for (ReturnStmt r : ownReturns(m)) {
                r.getExpression().ifPresent(x -> {
                    Node body = x instanceof LambdaExpr l ? l.getBody() : x;
                    Entry e = add(
                            s,
                            "Spring Cloud Function " + rt + "<" + event + "> on Lambda",
                            "lambda",
                            owner(m),
                            m,
                            body,
                            m);
                    e.ackText = "Lambda deletes the batch when the function returns; a failure redelivers all of it";
                    e.loop = true;
                });
            }
            return;
        }
        if (!streamModules.containsKey(s.module()) && !settings.hasPrefix(s.module(), "spring.cloud.stream")) {
            return;
        }
        for (ReturnStmt r : ownReturns(m)) {
            r.getExpression().ifPresent(x -> {
                Node body = x instanceof LambdaExpr l ? l.getBody() : x;
                Entry e = add(s, "Spring Cloud Stream " + rt + " bean", "stream", owner(m), m, body, m);
                e.ackText = "the binder acknowledges after the function returns";
            });
        }
    }

    /** The method's own returns, not those inside the lambdas or anonymous classes it returns. */
    private static List<ReturnStmt> ownReturns(MethodDeclaration m) {
        return m.findAll(ReturnStmt.class).stream()
                .filter(r ->
                        r.findAncestor(LambdaExpr.class).filter(m::isAncestorOf).isEmpty()
                                && r.findAncestor(MethodDeclaration.class).orElse(null) == m)
                .toList();
    }

    /**
     * The event a function bean takes: its input type, or the payload of a {@code Message<…>} input (Spring Cloud
     * Function's AWS adapter documents {@code Function<Message<SQSEvent>, …>} beside the plain event).
     */
    private static String functionInput(com.github.javaparser.ast.type.Type input) {
        if (input instanceof ClassOrInterfaceType ct
                && ct.getNameAsString().equals("Message")
                && ct.getTypeArguments().filter(a -> a.size() == 1).isPresent()) {
            return Types.simple(ct.getTypeArguments().get().get(0));
        }
        return Types.simple(input);
    }

    // ---- client-library loops and callbacks ----------------------------------------------------

    /** A method of the repository that takes a listener: its name, its arity, the listener's index and broker. */
    private record ListenerParameter(int arity, int index, String broker) {}

    private final Map<String, List<ListenerParameter>> listenerParameters = new HashMap<>();

    /**
     * The repository's own methods that take a {@code MessageListener} (JMS, Spring AMQP, Spring
     * Kafka): a registry or builder that puts it on a container. A lambda passed there is a listener
     * just as one given to {@code setMessageListener}, wherever the call is written, so the files that
     * call these methods by name are parsed too.
     */
    private void listenerParameters() {
        for (Repo.Source s : repo.sources()) {
            String broker = listenerBroker(s);
            if (broker == null || !s.text().contains("MessageListener")) {
                continue;
            }
            for (MethodDeclaration m : s.cu().findAll(MethodDeclaration.class)) {
                for (int i = 0; i < m.getParameters().size(); i++) {
                    String t = Types.simple(m.getParameter(i).getType());
                    // the library's listener interface: a project's own *MessageListener is called only
                    // if the project calls it, which the trace follows as any other call
                    if (t.endsWith("MessageListener")
                            && !t.equals("BatchMessageListener")
                            && !types.isRepoType(t)
                            && !m.getNameAsString().equals("setMessageListener")) {
                        listenerParameters
                                .computeIfAbsent(m.getNameAsString(), k -> new ArrayList<>())
                                .add(new ListenerParameter(m.getParameters().size(), i, broker));
                    }
                }
            }
        }
        repo.parseHolding(listenerParameters.keySet().stream().map(n -> n + "(").toList());
    }

    /** A lambda passed as the listener argument of one of the repository's listener-taking methods. */
    private void listenerArgument(Repo.Source s, MethodCallExpr call) {
        for (ListenerParameter p : listenerParameters.getOrDefault(call.getNameAsString(), List.of())) {
            if (call.getArguments().size() == p.arity() && call.getArgument(p.index()) instanceof LambdaExpr l) {
                listened(add(
                        s,
                        "MessageListener lambda passed to " + call.getNameAsString(),
                        p.broker(),
                        owner(call) + " listener",
                        l,
                        l.getBody(),
                        l));
                return;
            }
        }
    }

    private static final Set<String> STREAMS_BUILDERS = Set.of("StreamsBuilder", "KStreamBuilder");

    /**
     * A Kafka Streams topology reading a topic ({@code builder.stream("orders")}, or {@code table}/{@code
     * globalTable} for a changelog, on a {@code StreamsBuilder} or the pre-1.0 {@code KStreamBuilder}):
     * a consumer whose offsets Streams commits
     * after the records went through the topology. The topology's own operators write only to topics;
     * its callbacks with effects ({@code peek}, {@code foreach}, {@code process}, mappers) are entry
     * points of their own and are traced there, so this one is listed and not traced again.
     */
    private void streamsSource(Repo.Source s, MethodCallExpr call) {
        String t = call.getScope().map(types::typeOf).orElse(null);
        if (call.getArguments().isEmpty() || t == null || !STREAMS_BUILDERS.contains(t)) {
            return;
        }
        Entry e = add(
                s,
                "Kafka Streams topology",
                "kafka",
                owner(call) + " " + call.getNameAsString() + "(" + call.getArgument(0) + ")",
                call,
                call,
                call);
        e.ackText = "Kafka Streams commits the offsets after the records went through the topology";
    }

    private void calls(Repo.Source s, MethodCallExpr call) {
        listenerArgument(s, call);
        if (CATALOGUE.names(EntryCatalogue.Shape.CALLBACK, call.getNameAsString())) {
            CATALOGUE
                    .match(EntryCatalogue.Shape.CALLBACK, call.getNameAsString(), s)
                    .ifPresent(r -> catalogueCallback(s, r, call));
        }
        if (CATALOGUE.names(EntryCatalogue.Shape.RECEIVE, call.getNameAsString())) {
            catalogueReceive(s, call);
        }
        String n = call.getNameAsString();
        switch (n) {
            case "poll" -> {
                String t = call.getScope().map(types::typeOf).orElse(null);
                if (t != null && KAFKA_CONSUMER_TYPES.contains(t)) {
                    kafkaLoop(s, call);
                } else if (t != null && KAFKA_SHARE_CONSUMER_TYPES.contains(t)) {
                    kafkaShareLoop(s, call);
                }
            }
            case "receiveMessage", "receiveMessages" -> {
                String t = call.getScope().map(types::typeOf).orElse(null);
                if (t != null
                        && (SQS_TYPES.contains(t) || SQS_WRAPPER.matcher(t).matches())) {
                    sqsLoop(s, call);
                }
            }
            case "basicConsume" -> rabbitConsume(s, call);
            case "handler" -> {
                zeebeWorker(s, call);
                vertxKafka(s, call);
                vertxReceiver(s, call);
            }
            case "batchHandler" -> vertxKafka(s, call);
            case "basicGet" -> {
                Node body = loopOrMethod(call);
                if (body != null) {
                    Entry e = add(s, "RabbitMQ basicGet loop", "rabbitmq", owner(call), call, body, call);
                    e.loop = true;
                    autoAckArg(e, call, 1);
                }
            }
            case "fetch", "nextMessage", "iterate", "fetchMessages", "fetchBytes", "next" -> {
                String t = call.getScope().map(types::typeOf).orElse("");
                if (t.startsWith("JetStream")
                                && !t.equals("JetStreamManagement")
                                && !n.equals("fetchMessages")
                                && !n.equals("fetchBytes")
                                && !n.equals("next")
                        || natsSimplified(t, n)) {
                    Node body = loopOrMethod(call);
                    if (body != null) {
                        Entry e = add(s, "NATS JetStream pull", "nats", owner(call), call, body, call);
                        e.ack = Entry.Ack.EXPLICIT;
                        e.ackText = "message.ack() after processing";
                        e.loop = true;
                    }
                } else if (t.equals("Subscription") && n.equals("nextMessage")) {
                    Node body = loopOrMethod(call);
                    if (body != null) {
                        Entry e = add(s, "NATS subscription", "nats", owner(call), call, body, call);
                        e.ack = Entry.Ack.NONE;
                        e.ackText = "core NATS: at-most-once, no acknowledgement";
                    }
                }
            }
            case "subscribe", "createDispatcher", "consume" -> {
                natsCallback(s, call);
                pubSubCallback(s, call);
            }
            case "subscribeAndConvert" -> pubSubCallback(s, call);
            case "newBuilder" -> pubSubCallback(s, call);
            case "consumeAutoAck", "consumeManualAck", "consumeNoAck" ->
                reactive(
                        s,
                        call,
                        "rabbitmq",
                        "reactor-rabbitmq Receiver." + n,
                        n.equals("consumeManualAck") ? Entry.Ack.EXPLICIT : Entry.Ack.AUTO,
                        n.equals("consumeManualAck")
                                ? "delivery.ack() in the pipeline"
                                : n + ": acknowledged as it is delivered, whatever the pipeline does after");
            case "receiveNoWait", "receiveBody", "receiveBodyNoWait" -> jmsReceive(s, call);
            case "setMessageListener", "setupMessageListener" -> listenerObject(s, call);
            case "receive",
                    "receiveAutoAck",
                    "receiveAtmostOnce",
                    "receiveAtMostOnce",
                    "receiveExactlyOnce",
                    "receiveMany" -> {
                if (n.equals("receive")) {
                    jmsReceive(s, call);
                }
                sqsTemplateReceive(s, call);
                String receiver = call.getScope().map(types::typeOf).orElse(null);
                if (call.getScope()
                                .map(x -> x.toString().contains("KafkaReceiver"))
                                .orElse(false)
                        || "KafkaReceiver".equals(receiver)
                        // Spring Kafka's reactive template over reactor-kafka: the same receive methods
                        || "ReactiveKafkaConsumerTemplate".equals(receiver)) {
                    reactive(
                            s,
                            call,
                            "kafka",
                            "reactor-kafka KafkaReceiver." + n,
                            n.equals("receive") || n.equals("receiveExactlyOnce") ? Entry.Ack.EXPLICIT : Entry.Ack.AUTO,
                            n.equals("receive")
                                    ? "receiverOffset().acknowledge()/commit() in the pipeline"
                                    : n + ": offsets committed before or apart from the pipeline's work");
                }
            }
            case "from" -> {
                integrationFlow(s, call);
                camelLambdaRoute(s, call);
            }
            case "peek", "foreach" -> streamsSideEffect(s, call);
            case "stream", "table", "globalTable" -> streamsSource(s, call);
            case "messageListener" -> {
                if (call.getArguments().size() == 1
                        && call.getArgument(0) instanceof LambdaExpr l
                        && call.toString().contains("MessageListenerContainer")) {
                    Entry e = add(
                            s,
                            "SqsMessageListenerContainer listener",
                            "sqs",
                            owner(call) + " listener",
                            l,
                            l.getBody(),
                            l);
                    e.ackText = "deleted after the listener returns (ON_SUCCESS, the default)";
                }
            }
            default -> {}
        }
    }

    /**
     * Spring Cloud AWS {@code SqsTemplate.receive}/{@code receiveMany}: by default the template
     * acknowledges (deletes) the messages as it returns them ({@code TemplateAcknowledgementMode.ACKNOWLEDGE}),
     * before the caller's work; {@code acknowledgementMode(MANUAL)} in the module leaves the delete to
     * the code. The statement or loop that uses the result is the consumer.
     */
    private void sqsTemplateReceive(Repo.Source s, MethodCallExpr call) {
        String t = call.getScope().map(types::typeOf).orElse(null);
        if ("RocketMQTemplate".equals(t)) {
            rocketTemplateReceive(s, call);
            return;
        }
        if (t == null || !(t.equals("SqsTemplate") || t.equals("SqsOperations") || t.equals("SqsAsyncOperations"))) {
            return;
        }
        Node body = loopOrMethod(call);
        if (body == null) {
            return;
        }
        Entry e = add(s, "SqsTemplate." + call.getNameAsString(), "sqs", owner(call), call, body, call);
        e.loop = true;
        if (repo.sources().stream()
                .anyMatch(o ->
                        o.module().equals(s.module()) && o.text().contains("TemplateAcknowledgementMode.MANUAL"))) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "acknowledgementMode MANUAL: the code acknowledges what it received";
        } else {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = e.location;
            e.ackText = "SqsTemplate acknowledges (deletes) what it receives as it returns it"
                    + " (TemplateAcknowledgementMode.ACKNOWLEDGE, the default), before the work on it";
        }
    }

    /**
     * rocketmq-spring {@code RocketMQTemplate.receive}: a lite pull consumer that commits its offsets as
     * it polls ({@code autoCommit}, the default), so what it returns is acknowledged before the caller's
     * work. The statement or loop that uses the result is the consumer.
     */
    private void rocketTemplateReceive(Repo.Source s, MethodCallExpr call) {
        Node body = loopOrMethod(call);
        if (body == null) {
            return;
        }
        Entry e = add(s, "RocketMQTemplate.receive", "rocketmq", owner(call), call, body, call);
        e.loop = true;
        e.ack = Entry.Ack.AUTO;
        e.ackSetting = e.location;
        e.ackText = "the lite pull consumer commits its offsets as it polls (autoCommit, the default), before the"
                + " work on what it returned";
    }

    private void kafkaLoop(Repo.Source s, MethodCallExpr poll) {
        Node body = loopOrMethod(poll);
        if (body == null) {
            return;
        }
        Entry e = add(s, "KafkaConsumer.poll loop", "kafka", owner(poll), poll, body, poll);
        e.loop = true;
        kafkaAck(e, s, poll);
    }

    /**
     * A share-group poll loop: what poll() returned is accepted at the next poll() or commitSync (implicit
     * acknowledgement) unless the loop acknowledges each record itself; a record not yet accepted when the consumer
     * dies is released to another consumer once its acquisition lock expires.
     */
    private void kafkaShareLoop(Repo.Source s, MethodCallExpr poll) {
        Node body = loopOrMethod(poll);
        if (body == null) {
            return;
        }
        Entry e = add(s, "ShareConsumer.poll loop", "kafka", owner(poll), poll, body, poll);
        e.loop = true;
        boolean acknowledges = !body.findAll(
                        MethodCallExpr.class, c -> c.getNameAsString().equals("acknowledge"))
                .isEmpty();
        e.ack = acknowledges ? Entry.Ack.EXPLICIT : Entry.Ack.AFTER_RETURN;
        e.ackText = acknowledges
                ? "consumer.acknowledge(record) in the loop, sent with the next poll() or commitSync()"
                : "a share group accepts what poll() returned at the next poll(), after this loop's work on it; a"
                        + " record whose consumer dies first is delivered again when its acquisition lock expires";
    }

    /** How a poll loop's offsets are committed, from the settings of the consumer it polls (as {@code e.self} builds it). */
    private void kafkaAck(Entry e, Repo.Source s, MethodCallExpr poll) {
        Node body = e.body;
        // the settings of the Properties this consumer is built from, when they can be followed there:
        // another consumer's Properties in the same file or module say nothing about this one
        Map<String, Settings.Setting> own = consumerConfig(poll, e.self).orElse(null);
        Settings.Setting auto =
                own != null ? own.get(Settings.norm("enable.auto.commit")) : settings.get(s, "enable.auto.commit");
        boolean commits = !body.findAll(
                        MethodCallExpr.class,
                        c -> c.getNameAsString().startsWith("commit")
                                || c.getNameAsString().equals("sendOffsetsToTransaction"))
                .isEmpty();
        // auto-commit runs inside poll() and commits what the previous poll() returned: in a loop that does its
        // work before polling again that is after the work, so the risk is a duplicate (a crash before the next
        // poll re-delivers the batch), not a loss; work handed to another thread is still lost (AFTER_RETURN's
        // hand-off check reports it)
        String afterWork =
                " commits the offsets of what poll() returned at the next poll(), after this loop's work on it";
        if (auto == null) {
            e.ack = Entry.Ack.AFTER_RETURN;
            e.ackSetting = e.location;
            e.ackText = "enable.auto.commit is not set: Kafka's default (true)" + afterWork;
        } else if (auto.isTrue()) {
            e.ack = Entry.Ack.AFTER_RETURN;
            e.ackSetting = auto.location();
            e.ackText = "enable.auto.commit=true" + afterWork;
        } else if (!auto.literal()) {
            e.ack = Entry.Ack.AFTER_RETURN;
            e.ackSetting = auto.location();
            e.ackText = "enable.auto.commit is chosen at run time (" + auto.value() + "): when true, Kafka" + afterWork;
        } else {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = commits
                    ? "commitSync/commitAsync in the loop"
                    : "enable.auto.commit=false: offsets committed by hand";
        }
        Settings.Setting records =
                own != null ? own.get(Settings.norm("max.poll.records")) : settings.get(s, "max.poll.records");
        Settings.Setting interval =
                own != null ? own.get(Settings.norm("max.poll.interval.ms")) : settings.get(s, "max.poll.interval.ms");
        if (records != null && interval != null && records.literal() && interval.literal()) {
            e.batch = records.asLong(0);
            e.leaseMs = interval.asLong(0);
            e.batchLocation = records.location();
            e.leaseName = "max.poll.interval.ms";
        }
    }

    /**
     * The settings of the consumer {@code poll} is called on, followed from its construction: the
     * variable or field it is held in, {@code new KafkaConsumer<>(props)} (or a factory method of the
     * repository that makes one), and the method that fills {@code props} (in place, or a method
     * returning it). Empty when any step cannot be followed.
     */
    private Optional<Map<String, Settings.Setting>> consumerConfig(MethodCallExpr poll, TypeDeclaration<?> self) {
        Optional<Expression> scope = poll.getScope();
        if (scope.isEmpty()) {
            return Optional.empty();
        }
        String name = scope.get() instanceof NameExpr n
                ? n.getNameAsString()
                : scope.get() instanceof com.github.javaparser.ast.expr.FieldAccessExpr fa
                                && fa.getScope().isThisExpr()
                        ? fa.getNameAsString()
                        : null;
        TypeDeclaration<?> owner = Types.enclosingType(poll);
        if (name == null || owner == null) {
            return Optional.empty();
        }
        List<Expression> inits = new ArrayList<>();
        MethodDeclaration m = Types.ancestor(poll, MethodDeclaration.class).orElse(null);
        for (Node where : m == null ? List.<Node>of(owner) : List.<Node>of(m, owner)) {
            for (VariableDeclarator v : where.findAll(
                    VariableDeclarator.class, v -> v.getNameAsString().equals(name))) {
                v.getInitializer().ifPresent(inits::add);
            }
            for (com.github.javaparser.ast.expr.AssignExpr a : where.findAll(
                    com.github.javaparser.ast.expr.AssignExpr.class,
                    a -> a.getTarget().toString().replaceFirst("^this\\.", "").equals(name))) {
                inits.add(a.getValue());
            }
            if (!inits.isEmpty()) {
                break;
            }
        }
        if (inits.size() != 1) {
            return Optional.empty();
        }
        return propsOf(inits.get(0), owner, self, 0);
    }

    /** The settings an expression that makes a consumer or its properties carries. */
    private Optional<Map<String, Settings.Setting>> propsOf(
            Expression x, TypeDeclaration<?> owner, TypeDeclaration<?> self, int depth) {
        if (depth > 3) {
            return Optional.empty();
        }
        if (x instanceof ObjectCreationExpr oc) {
            if (oc.getType().getNameAsString().endsWith("KafkaConsumer")
                    && !oc.getArguments().isEmpty()) {
                return propsOf(oc.getArgument(0), owner, self, depth + 1);
            }
            return Optional.empty();
        }
        if (x instanceof NameExpr n) {
            // a local filled in the method that declares it
            Node decl = Types.ancestor(x, MethodDeclaration.class)
                    .map(Node.class::cast)
                    .or(() -> Optional.ofNullable(
                            Types.ancestor(x, com.github.javaparser.ast.body.ConstructorDeclaration.class)
                                    .map(Node.class::cast)
                                    .orElse(null)))
                    .orElse(null);
            if (decl == null) {
                return Optional.empty();
            }
            if (decl instanceof com.github.javaparser.ast.body.ConstructorDeclaration ctor && self != null) {
                // a parameter of the abstract consumer's constructor: the subclass this consumer runs as says what
                // it passes, in its super(…) call
                int index = -1;
                for (int i = 0; i < ctor.getParameters().size(); i++) {
                    if (ctor.getParameter(i).getNameAsString().equals(n.getNameAsString())) {
                        index = i;
                    }
                }
                if (index >= 0) {
                    for (com.github.javaparser.ast.stmt.ExplicitConstructorInvocationStmt sup : self.findAll(
                            com.github.javaparser.ast.stmt.ExplicitConstructorInvocationStmt.class,
                            inv -> !inv.isThis() && Types.enclosingType(inv) == self)) {
                        if (sup.getArguments().size() == ctor.getParameters().size()) {
                            return propsOf(sup.getArgument(index), self, null, depth + 1);
                        }
                    }
                }
            }
            for (VariableDeclarator v : decl.findAll(
                    VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))) {
                Expression init = v.getInitializer().orElse(null);
                if (init instanceof ObjectCreationExpr oc && oc.getArguments().isEmpty()) {
                    return settings.statedIn(decl);
                }
                if (init instanceof MethodCallExpr mc) {
                    return propsOf(mc, owner, self, depth + 1);
                }
            }
            return Optional.empty();
        }
        if (x instanceof MethodCallExpr mc) {
            // a method of this class, or a static one of another repository class, that builds them
            List<MethodDeclaration> targets = new ArrayList<>();
            if (mc.getScope().isEmpty() || mc.getScope().get().isThisExpr()) {
                targets.addAll(owner.getMethodsByName(mc.getNameAsString()));
            } else if (mc.getScope().get() instanceof NameExpr t
                    && Character.isUpperCase(t.getNameAsString().charAt(0))) {
                targets.addAll(repo.methods(
                        t.getNameAsString(),
                        mc.getNameAsString(),
                        mc.getArguments().size(),
                        mc));
            }
            if (targets.size() != 1 || targets.get(0).getBody().isEmpty()) {
                return Optional.empty();
            }
            MethodDeclaration t = targets.get(0);
            for (ReturnStmt r : t.findAll(ReturnStmt.class)) {
                Optional<Expression> rx = r.getExpression();
                if (rx.isPresent()
                        && rx.get() instanceof ObjectCreationExpr oc
                        && oc.getType().getNameAsString().endsWith("KafkaConsumer")) {
                    return propsOf(oc, Types.enclosingType(t), self, depth + 1);
                }
            }
            return settings.statedIn(t.getBody().get());
        }
        return Optional.empty();
    }

    private void sqsLoop(Repo.Source s, MethodCallExpr receive) {
        Node body = loopOrMethod(receive);
        MethodDeclaration m = Types.ancestor(receive, MethodDeclaration.class).orElse(null);
        if (body == null || m == null) {
            return;
        }
        boolean inLoop = body != m.getBody().orElse(null);
        boolean returnsMessages = !inLoop && !m.getType().isVoidType();
        if (returnsMessages) {
            // receive in a helper that returns the messages: the caller in the same class is the consumer
            TypeDeclaration<?> owner = Types.enclosingType(m);
            for (MethodCallExpr c : owner == null
                    ? List.<MethodCallExpr>of()
                    : owner.findAll(
                            MethodCallExpr.class,
                            c -> c.getNameAsString().equals(m.getNameAsString())
                                    && c.getScope().isEmpty())) {
                Node callerBody = loopOrMethod(c);
                if (callerBody != null) {
                    // traced from the caller, located where the messages are received: that is the line a
                    // reader looks for the queue at, the caller may be a handler of something else (a Lambda)
                    Entry e = add(s, "SQS receiveMessage", "sqs", owner(c), c, callerBody, receive);
                    sqsAck(e, receive);
                }
            }
            // the project's own wrapper called from another class, through the helper's class or an interface it
            // implements (messageService.receiveMessage(queue) on a MessageService the helper implements)
            Set<String> wrappers = new java.util.HashSet<>();
            if (owner instanceof ClassOrInterfaceDeclaration cd) {
                wrappers.add(cd.getNameAsString());
                cd.getImplementedTypes().forEach(t -> wrappers.add(t.getNameAsString()));
                cd.getExtendedTypes().forEach(t -> wrappers.add(t.getNameAsString()));
            }
            for (Repo.Source o : wrappers.isEmpty() ? List.<Repo.Source>of() : repo.sources()) {
                for (MethodCallExpr c : o.cu().findAll(
                                MethodCallExpr.class,
                                c -> c.getNameAsString().equals(m.getNameAsString())
                                        && c.getArguments().size()
                                                == m.getParameters().size()
                                        && c.getScope()
                                                .map(x -> wrappers.contains(types.typeOf(x)))
                                                .orElse(false))) {
                    Node callerBody = loopOrMethod(c);
                    if (callerBody != null) {
                        Entry e = add(
                                o,
                                "SQS receiveMessage through " + owner.getNameAsString(),
                                "sqs",
                                owner(c),
                                c,
                                callerBody,
                                c);
                        sqsAck(e, receive);
                    }
                }
            }
            // handed to a loop as a method reference: driver.run(this::receive)
            for (MethodReferenceExpr ref : owner == null
                    ? List.<MethodReferenceExpr>of()
                    : owner.findAll(
                            MethodReferenceExpr.class,
                            r -> r.getIdentifier().equals(m.getNameAsString())
                                    && r.getScope() instanceof com.github.javaparser.ast.expr.ThisExpr)) {
                Node at = ref.getParentNode().orElse(ref);
                Node callerBody = loopOrMethod(ref);
                if (callerBody != null) {
                    Entry e = add(s, "SQS receiveMessage", "sqs", owner(ref), at, callerBody, at);
                    sqsAck(e, receive);
                }
            }
            return;
        }
        Entry e = add(
                s,
                inLoop ? "SQS receiveMessage loop" : "SQS receiveMessage",
                "sqs",
                owner(receive),
                receive,
                body,
                receive);
        sqsAck(e, receive);
    }

    /**
     * A listener handed to a consumer or a listener container by hand ({@code
     * consumer.setMessageListener(message -> …)}, an anonymous {@code MessageListener}, or {@code
     * this::onMessage}): its body is the consumer, acknowledged when it returns. The broker is read
     * from the file's imports (JMS, Spring AMQP, Spring Kafka).
     */
    private void listenerObject(Repo.Source s, MethodCallExpr call) {
        if (call.getArguments().size() != 1) {
            return;
        }
        Expression a = call.getArgument(0);
        // (MessageListener<String, String>) record -> …: the cast only names the listener's type
        while (a instanceof CastExpr || a instanceof EnclosedExpr) {
            a = a instanceof CastExpr c ? c.getExpression() : ((EnclosedExpr) a).getInner();
        }
        String broker = listenerBroker(s);
        if (broker == null) {
            return;
        }
        String name = owner(call) + " listener";
        if (a instanceof LambdaExpr l) {
            listened(add(s, "setMessageListener lambda", broker, name, l, l.getBody(), l));
        } else if (a instanceof ObjectCreationExpr oc
                && oc.getAnonymousClassBody().isPresent()) {
            for (var member : oc.getAnonymousClassBody().get()) {
                if (member instanceof MethodDeclaration md
                        && md.getNameAsString().matches("onMessage|received")
                        && md.getBody().isPresent()) {
                    listened(add(
                            s,
                            oc.getType().getNameAsString() + "." + md.getNameAsString(),
                            broker,
                            name,
                            md,
                            md.getBody().get(),
                            md));
                }
            }
        } else if (a instanceof MethodReferenceExpr ref && selfReference(ref)) {
            TypeDeclaration<?> owner = Types.enclosingType(call);
            for (MethodDeclaration md :
                    owner == null ? List.<MethodDeclaration>of() : owner.getMethodsByName(ref.getIdentifier())) {
                md.getBody()
                        .ifPresent(b -> listened(add(
                                s,
                                "setMessageListener(this::" + ref.getIdentifier() + ")",
                                broker,
                                owner(md),
                                md,
                                b,
                                md)));
            }
        }
    }

    private static void listened(Entry e) {
        e.ackText = "the consumer acknowledges after the listener returns";
    }

    /**
     * {@code this::m}, also when cast to the listener type: {@code (MessageListener<K, V>) this::m} parses as a method
     * reference whose scope is the cast {@code this}.
     */
    private static boolean selfReference(MethodReferenceExpr ref) {
        Expression scope = ref.getScope();
        while (scope instanceof CastExpr || scope instanceof EnclosedExpr) {
            scope = scope instanceof CastExpr c ? c.getExpression() : ((EnclosedExpr) scope).getInner();
        }
        return scope.isThisExpr();
    }

    private static String listenerBroker(Repo.Source s) {
        for (com.github.javaparser.ast.ImportDeclaration imp : s.cu().getImports()) {
            String n = imp.getNameAsString();
            if (n.startsWith("javax.jms") || n.startsWith("jakarta.jms") || n.contains(".jms.")) {
                return "jms";
            }
            if (n.startsWith("org.springframework.amqp") || n.startsWith("com.rabbitmq")) {
                return "rabbitmq";
            }
            if (n.startsWith("org.springframework.kafka")) {
                return "kafka";
            }
        }
        return null;
    }

    /** The JMS consumer types whose {@code receive} pulls one message from the broker. */
    private static final Set<String> JMS_CONSUMER_TYPES =
            Set.of("MessageConsumer", "QueueReceiver", "TopicSubscriber", "JMSConsumer");

    /**
     * A synchronous JMS receive ({@code consumer.receive()} in a loop or a method): the work after it
     * is the consumer. Its acknowledgement is the session's mode, read from the {@code createSession}
     * (or {@code createContext}) call in the same method or class: AUTO_ACKNOWLEDGE and DUPS_OK ack
     * as receive() returns, CLIENT_ACKNOWLEDGE on {@code message.acknowledge()}, a transacted
     * session on {@code session.commit()}.
     */
    private void jmsReceive(Repo.Source s, MethodCallExpr receive) {
        String t = receive.getScope().map(types::typeOf).orElse(null);
        if (t == null || !JMS_CONSUMER_TYPES.contains(t)) {
            return;
        }
        Node body = loopOrMethod(receive);
        MethodDeclaration m = Types.ancestor(receive, MethodDeclaration.class).orElse(null);
        if (body == null || m == null) {
            return;
        }
        boolean inLoop = body != m.getBody().orElse(null);
        Entry e = add(s, inLoop ? "JMS receive loop" : "JMS receive", "jms", owner(receive), receive, body, receive);
        e.loop = inLoop;
        MethodCallExpr session = jmsSession(m, receive);
        String mode = session == null ? "" : session.getArguments().toString();
        if (session == null) {
            e.ackText = "the session's acknowledge mode is not in sight";
        } else if (mode.contains("SESSION_TRANSACTED")
                || (session.getArguments().size() >= 2
                        && session.getArgument(0).toString().equals("true"))) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "transacted session: session.commit() after processing";
        } else if (mode.contains("CLIENT_ACKNOWLEDGE")) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "CLIENT_ACKNOWLEDGE: message.acknowledge() after processing";
        } else if (mode.contains("AUTO_ACKNOWLEDGE") || mode.contains("DUPS_OK_ACKNOWLEDGE")) {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = repo.loc(session);
            e.ackText = (mode.contains("DUPS_OK") ? "DUPS_OK_ACKNOWLEDGE" : "AUTO_ACKNOWLEDGE")
                    + ": receive() acknowledges the message as it returns, before the work after it";
        } else {
            e.ackText = "the session's acknowledge mode (" + mode + ") is not a literal";
        }
    }

    /**
     * The session-creating call of a JMS receive: in its method; else, for a consumer held in a field, in the method
     * that assigns the field its {@code createConsumer(…)} (a subscribe method the receive loop calls, in a class
     * opening several sessions); else the one in its class.
     */
    private static MethodCallExpr jmsSession(MethodDeclaration m, MethodCallExpr receive) {
        java.util.function.Predicate<MethodCallExpr> creates =
                c -> c.getNameAsString().matches("create(Queue|Topic)?Session|createContext");
        List<MethodCallExpr> inMethod = m.findAll(MethodCallExpr.class, creates::test);
        if (!inMethod.isEmpty()) {
            return inMethod.get(0);
        }
        TypeDeclaration<?> owner = Types.enclosingType(m);
        String held = receive.getScope()
                .map(x -> x instanceof NameExpr n
                        ? n.getNameAsString()
                        : x instanceof com.github.javaparser.ast.expr.FieldAccessExpr fa
                                        && fa.getScope().isThisExpr()
                                ? fa.getNameAsString()
                                : null)
                .orElse(null);
        if (held != null && owner != null && owner.getFieldByName(held).isPresent()) {
            for (com.github.javaparser.ast.expr.AssignExpr set :
                    owner.findAll(com.github.javaparser.ast.expr.AssignExpr.class)) {
                Expression target = set.getTarget();
                String name = target instanceof NameExpr n
                        ? n.getNameAsString()
                        : target instanceof com.github.javaparser.ast.expr.FieldAccessExpr fa
                                ? fa.getNameAsString()
                                : "";
                if (name.equals(held)
                        && set.getValue() instanceof MethodCallExpr made
                        && made.getNameAsString()
                                .matches("create(Consumer|DurableSubscriber|DurableConsumer"
                                        + "|SharedConsumer|SharedDurableConsumer|Receiver|Subscriber)")) {
                    List<MethodCallExpr> there = Types.ancestor(set, MethodDeclaration.class)
                            .map(a -> a.findAll(MethodCallExpr.class, creates::test))
                            .orElse(List.of());
                    if (!there.isEmpty()) {
                        return there.get(0);
                    }
                }
            }
        }
        List<MethodCallExpr> inClass = owner == null ? List.of() : owner.findAll(MethodCallExpr.class, creates::test);
        return inClass.size() == 1 ? inClass.get(0) : null;
    }

    private void sqsAck(Entry e, MethodCallExpr receive) {
        e.ack = Entry.Ack.EXPLICIT;
        e.ackText = "deleteMessage after processing";
        e.loop = true;
        MethodDeclaration m = Types.ancestor(receive, MethodDeclaration.class).orElse(null);
        String text = m == null ? "" : m.toString();
        var max = Pattern.compile("maxNumberOfMessages\\((\\d+)\\)|setMaxNumberOfMessages\\((\\d+)\\)")
                .matcher(text);
        var vis = Pattern.compile("visibilityTimeout\\((\\d+)\\)|setVisibilityTimeout\\((\\d+)\\)")
                .matcher(text);
        if (max.find() && vis.find()) {
            e.batch = Long.parseLong(max.group(1) != null ? max.group(1) : max.group(2));
            e.leaseMs = 1000L * Long.parseLong(vis.group(1) != null ? vis.group(1) : vis.group(2));
            e.batchLocation = repo.loc(receive);
            e.leaseName = "the visibility timeout";
        }
    }

    private void rabbitConsume(Repo.Source s, MethodCallExpr call) {
        if (call.getArguments().size() < 2) {
            return;
        }
        // the first argument after the queue that resolves to a handler: a boolean, a consumer tag or an argument
        // map held in a variable is not one, so each candidate is followed before the next is tried
        Node[] handler = null;
        for (int i = 1; i < call.getArguments().size() && handler == null; i++) {
            Expression a = call.getArgument(i);
            handler = deliverHandler(call, a);
            if (handler == null && callbackArgument(a)) {
                break; // a callback that cannot be followed: the ones after it (cancel, shutdown) are not the handler
            }
        }
        Node decl = handler == null ? null : handler[0];
        Node body = handler == null ? null : handler[1];
        Node at = handler == null ? call : handler[2];
        if (body == null) {
            return;
        }
        Entry e = add(
                s,
                "RabbitMQ basicConsume",
                "rabbitmq",
                decl instanceof MethodDeclaration ? owner(decl) : owner(call) + " callback",
                decl,
                body,
                at);
        e.ack = Entry.Ack.EXPLICIT;
        e.ackText = "channel.basicAck in the callback";
        if (call.getArguments().size() >= 3 || (call.getArguments().size() == 2 && isBoolean(call.getArgument(1)))) {
            autoAckArg(e, call, 1);
        }
    }

    /** An argument that is a callback by its shape or its declared type ({@code DeliverCallback}, {@code Consumer}). */
    private boolean callbackArgument(Expression a) {
        if (a instanceof LambdaExpr || a instanceof MethodReferenceExpr || a instanceof ObjectCreationExpr) {
            return true;
        }
        String t = a instanceof NameExpr || a instanceof FieldAccessExpr ? types.typeOf(a) : null;
        return t != null && t.matches("\\w*(Callback|Consumer)");
    }

    /**
     * The delivery handler one argument of {@code basicConsume} stands for, as {declaration, body, entry location}: a
     * lambda, an anonymous {@code DefaultConsumer}, a {@code this::method} reference, a local or field holding one of
     * those, or an instance of a repository class overriding {@code handleDelivery}; null when it is none of them.
     */
    private Node[] deliverHandler(MethodCallExpr call, Expression a) {
        if (!(a instanceof LambdaExpr
                || a instanceof ObjectCreationExpr
                || a instanceof MethodReferenceExpr
                || (a instanceof NameExpr && !isBooleanVar(a)))) {
            return null;
        }
        Expression cb = a;
        if (cb instanceof NameExpr n) {
            cb = lambdaOf(n)
                    .map(Expression.class::cast)
                    .or(() -> anonymousOf(n))
                    .orElse(cb);
        }
        if (cb instanceof LambdaExpr l) {
            return new Node[] {l, l.getBody(), call};
        }
        if (cb instanceof ObjectCreationExpr oc && oc.getAnonymousClassBody().isPresent()) {
            for (var member : oc.getAnonymousClassBody().get()) {
                if (member instanceof MethodDeclaration md
                        && md.getNameAsString().equals("handleDelivery")
                        && md.getBody().isPresent()) {
                    // the handler an anonymous DefaultConsumer overrides is the entry point, not the
                    // basicConsume call some lines below it
                    return new Node[] {md, md.getBody().get(), md};
                }
            }
            return null;
        }
        if (cb instanceof MethodReferenceExpr ref) {
            if (!selfReference(ref)) {
                return null;
            }
            // basicConsume(queue, false, this::onDelivery, …): the class's own method is the DeliverCallback
            TypeDeclaration<?> owner = Types.enclosingType(call);
            for (MethodDeclaration md :
                    owner == null ? List.<MethodDeclaration>of() : owner.getMethodsByName(ref.getIdentifier())) {
                if (md.getBody().isPresent() && md.getParameters().size() == 2) {
                    return new Node[] {md, md.getBody().get(), md};
                }
            }
            return null;
        }
        String t = cb instanceof ObjectCreationExpr oc ? oc.getType().getNameAsString() : types.typeOf(cb);
        for (MethodDeclaration md : t == null ? List.<MethodDeclaration>of() : repo.methods(t, "handleDelivery", 4)) {
            if (md.getBody().isPresent()) {
                return new Node[] {md, md.getBody().get(), call};
            }
        }
        return null;
    }

    /** The lambda a local variable or a field is initialized with: {@code DeliverCallback cb = (tag, d) -> …}. */
    private static Optional<LambdaExpr> lambdaOf(NameExpr n) {
        return initializerOf(n, Expression::isLambdaExpr).map(Expression::asLambdaExpr);
    }

    /** The anonymous class a local or a field is initialized with: {@code Consumer c = new DefaultConsumer(ch) {…}}. */
    private static Optional<Expression> anonymousOf(NameExpr n) {
        return initializerOf(
                n,
                i -> i instanceof ObjectCreationExpr oc
                        && oc.getAnonymousClassBody().isPresent());
    }

    /**
     * The initializer of the local {@code n} names in its method, or else of the field of that name in the enclosing
     * class (a callback built once and handed to the consume call later), when it is of the shape asked for.
     */
    static Optional<Expression> initializerOf(NameExpr n, java.util.function.Predicate<Expression> shape) {
        MethodDeclaration m = Types.ancestor(n, MethodDeclaration.class).orElse(null);
        if (m != null) {
            for (VariableDeclarator d :
                    m.findAll(VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))) {
                if (d.getInitializer().filter(shape).isPresent()) {
                    return d.getInitializer();
                }
            }
        }
        TypeDeclaration<?> t = Types.enclosingType(n);
        if (t == null) {
            return Optional.empty();
        }
        for (com.github.javaparser.ast.body.FieldDeclaration f : t.getFields()) {
            for (VariableDeclarator d : f.getVariables()) {
                if (d.getNameAsString().equals(n.getNameAsString())
                        && d.getInitializer().filter(shape).isPresent()) {
                    return d.getInitializer();
                }
            }
        }
        return Optional.empty();
    }

    private boolean isBooleanVar(Expression a) {
        return a instanceof NameExpr n
                && Optional.ofNullable(types.declaredType(n, n.getNameAsString()))
                        .map(t -> t.asString().equals("boolean") || t.asString().equals("Boolean"))
                        .orElse(false);
    }

    private boolean isBoolean(Expression a) {
        return a instanceof BooleanLiteralExpr || isBooleanVar(a);
    }

    private void autoAckArg(Entry e, MethodCallExpr call, int index) {
        if (call.getArguments().size() <= index) {
            return;
        }
        Expression a = call.getArgument(index);
        Boolean v = null;
        if (a instanceof BooleanLiteralExpr b) {
            v = b.getValue();
        } else if (a instanceof NameExpr n) {
            v = booleanValueOf(n);
        }
        if (Boolean.TRUE.equals(v)) {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = repo.loc(call);
            e.ackText = "autoAck=true: the broker forgets the message as it is delivered";
        } else if (Boolean.FALSE.equals(v)) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "autoAck=false, channel.basicAck";
        }
    }

    private Boolean booleanValueOf(NameExpr n) {
        MethodDeclaration m = Types.ancestor(n, MethodDeclaration.class).orElse(null);
        TypeDeclaration<?> t = Types.enclosingType(n);
        for (Node scope : new Node[] {m, t}) {
            if (scope == null) {
                continue;
            }
            for (VariableDeclarator d : scope.findAll(
                    VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))) {
                if (d.getInitializer().isPresent() && d.getInitializer().get() instanceof BooleanLiteralExpr b) {
                    return b.getValue();
                }
            }
        }
        return null;
    }

    /**
     * NATS JetStream's simplified API (nats.java 2.16+): a {@code ConsumerContext} (or an ordered one)
     * read with {@code next()}, or the {@code IterableConsumer}/{@code FetchConsumer} its {@code iterate}
     * and {@code fetchMessages}/{@code fetchBytes}/{@code fetch} return, read with {@code nextMessage}
     * (the receive is there, not at the call that opens the consumer).
     */
    private static boolean natsSimplified(String type, String method) {
        return type.endsWith("ConsumerContext") && method.equals("next")
                || (type.equals("IterableConsumer") || type.equals("FetchConsumer")) && method.equals("nextMessage");
    }

    private void natsCallback(Repo.Source s, MethodCallExpr call) {
        String t = call.getScope().map(types::typeOf).orElse("");
        boolean consume = call.getNameAsString().equals("consume");
        if (consume != t.endsWith("ConsumerContext")) {
            // consume(handler) belongs to the simplified API's contexts; subscribe to the classic ones
            return;
        }
        boolean jetStream = t.startsWith("JetStream") || consume;
        if (!jetStream && !t.equals("Connection") && !t.equals("Dispatcher")) {
            return;
        }
        for (Expression a : call.getArguments()) {
            Node[] handler = callback(a, 1);
            if (handler != null) {
                Entry e = add(
                        s,
                        consume
                                ? "NATS JetStream ConsumerContext.consume"
                                : jetStream ? "NATS JetStream push subscription" : "NATS subscription",
                        "nats",
                        owner(call) + " handler",
                        handler[0],
                        handler[1],
                        call);
                if (jetStream) {
                    e.ack = Entry.Ack.EXPLICIT;
                    e.ackText = "message.ack() in the handler";
                    int idx = call.getArguments().indexOf(a);
                    if (idx + 1 < call.getArguments().size()
                            && call.getArgument(idx + 1) instanceof BooleanLiteralExpr b
                            && b.getValue()) {
                        e.ack = Entry.Ack.AUTO;
                        e.ackSetting = repo.loc(call);
                        e.ackText = "autoAck=true: acked as soon as the handler returns or throws";
                    }
                } else {
                    e.ack = Entry.Ack.NONE;
                    e.ackText = "core NATS: at-most-once, no acknowledgement";
                }
            }
        }
    }

    // ---- entry points behind wrappers ------------------------------------------------------------

    /** A reactive receiver: the whole pipeline statement is the handler (its lambdas run per message). */
    private void reactive(Repo.Source s, MethodCallExpr call, String broker, String kind, Entry.Ack ack, String text) {
        Statement stmt = Types.ancestor(call, Statement.class).orElse(null);
        // Flux.using(receiverProvider::createReceiver, r -> r.consumeManualAck(queue), Receiver::close): the consume
        // is the body of a resource lambda, and the pipeline is the chain around the using call
        if (stmt != null
                && stmt.getParentNode().orElse(null) instanceof com.github.javaparser.ast.expr.LambdaExpr l
                && l.getParentNode().orElse(null) instanceof MethodCallExpr using
                && using.getNameAsString().matches("using|usingWhen")
                && using.getScope()
                        .map(Repo::printed)
                        .filter(x -> x.matches("Flux|Mono"))
                        .isPresent()) {
            stmt = Types.ancestor(using, Statement.class).orElse(stmt);
        }
        if (stmt == null) {
            return;
        }
        List<Subscriber> subscribers = stmt instanceof ReturnStmt ? fluxSubscribers(call) : List.of();
        if (subscribers.isEmpty()) {
            reactiveEntry(s, kind, broker, owner(call) + " pipeline", call, stmt, call, ack, text, call);
        }
        for (Subscriber sub : subscribers) {
            reactiveEntry(
                    sub.source(),
                    kind,
                    broker,
                    owner(sub.at()) + " pipeline",
                    sub.at(),
                    sub.stmt(),
                    sub.at(),
                    ack,
                    text,
                    call);
        }
    }

    private void reactiveEntry(
            Repo.Source s,
            String kind,
            String broker,
            String name,
            Node decl,
            Node body,
            Node at,
            Entry.Ack ack,
            String text,
            MethodCallExpr consume) {
        Entry e = add(s, kind, broker, name, decl, body, at);
        e.ack = ack;
        e.ackText = text;
        if (ack == Entry.Ack.AUTO) {
            e.ackSetting = repo.loc(consume);
        }
    }

    /** A statement that subscribes to a flux handed in from elsewhere, in the file {@code source}. */
    private record Subscriber(Repo.Source source, Statement stmt, Node at) {}

    /**
     * A bean method returns the receiver's flux ({@code @Bean Flux<Delivery> deliveries(Receiver r) {
     * return r.consumeNoAck(q); }}): the pipeline runs where that flux is injected and used, so each
     * statement that calls on a field or parameter of the same declared type is the handler.
     */
    private List<Subscriber> fluxSubscribers(MethodCallExpr call) {
        MethodDeclaration m = Types.ancestor(call, MethodDeclaration.class).orElse(null);
        if (m == null || !m.getType().isClassOrInterfaceType() || !Types.annotated(m.getAnnotations(), "Bean")) {
            return List.of();
        }
        String type = m.getType().asString().replace(" ", "");
        if (!type.startsWith("Flux<") && !type.startsWith("Publisher<")) {
            return List.of();
        }
        List<Subscriber> out = new ArrayList<>();
        for (Repo.Source src : repo.sources()) {
            if (!src.text().contains(type.substring(0, type.indexOf('<')))) {
                continue;
            }
            Set<String> names = new java.util.HashSet<>();
            for (VariableDeclarator v : src.cu().findAll(VariableDeclarator.class)) {
                if (v.getType().asString().replace(" ", "").equals(type)
                        && v.getInitializer().isEmpty()) {
                    names.add(v.getNameAsString());
                }
            }
            for (com.github.javaparser.ast.body.Parameter p :
                    src.cu().findAll(com.github.javaparser.ast.body.Parameter.class)) {
                if (p.getType().asString().replace(" ", "").equals(type)
                        && !(p.getParentNode().orElse(null)
                                instanceof com.github.javaparser.ast.body.ConstructorDeclaration)) {
                    names.add(p.getNameAsString());
                }
            }
            for (MethodCallExpr use : src.cu()
                    .findAll(
                            MethodCallExpr.class,
                            c -> c.getScope()
                                    .map(x -> x instanceof NameExpr n && names.contains(n.getNameAsString())
                                            || x instanceof com.github.javaparser.ast.expr.FieldAccessExpr fa
                                                    && fa.getScope().isThisExpr()
                                                    && names.contains(fa.getNameAsString()))
                                    .orElse(false))) {
                Statement st = Types.ancestor(use, Statement.class).orElse(null);
                if (st != null
                        && !(st instanceof ReturnStmt)
                        && Types.ancestor(use, MethodDeclaration.class).isPresent()) {
                    out.add(new Subscriber(src, st, use));
                }
            }
        }
        return out;
    }

    /** {@code MessageReceiver receiver = (message, consumer) -> …}: the Google Pub/Sub client's callback. */
    private void pubSubReceiver(Repo.Source s, VariableDeclarator v) {
        String t = Types.simple(v.getType());
        if ((t.equals("MessageReceiver") || t.equals("MessageReceiverWithAckResponse"))
                && v.getInitializer().filter(Expression::isLambdaExpr).isPresent()) {
            LambdaExpr l = v.getInitializer().get().asLambdaExpr();
            Entry e = add(s, "Pub/Sub " + t, "pubsub", owner(v) + " receiver", l, l.getBody(), l);
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "consumer.ack() in the receiver";
        }
    }

    /** {@code IntegrationFlow.from(Kafka.messageDrivenChannelAdapter(…))…}: a flow fed by a broker. */
    private void integrationFlow(Repo.Source s, MethodCallExpr from) {
        if (from.getArguments().isEmpty()) {
            return;
        }
        String source;
        MethodCallExpr src = inboundSpec(from.getArgument(0));
        if (src != null) {
            source = src.getScope().map(Object::toString).orElse("") + "." + src.getNameAsString();
        } else if (from.getScope()
                .map(x -> x.toString().matches("IntegrationFlows?"))
                .orElse(false)) {
            // a flow from an adapter the project builds itself (a @Bean ServiceBusInboundChannelAdapter, a field of
            // a KafkaMessageDrivenChannelAdapter): the adapter's type says it is inbound
            source = adapterType(from.getArgument(0));
            if (binderChannel(s, from.getArgument(0))) {
                // a flow from a channel Spring Cloud Stream binds to the broker (@EnableBinding's @Input channel)
                Statement stmt = Types.ancestor(from, Statement.class).orElse(null);
                if (stmt != null) {
                    Entry e = add(
                            s,
                            "Spring Cloud Stream flow from a bound channel",
                            "stream",
                            owner(from) + " flow",
                            from,
                            stmt,
                            from);
                    e.ackText = "the binder acknowledges after the flow returns";
                }
                return;
            }
            if (source == null || !INBOUND_ADAPTER.matcher(source).matches()) {
                return;
            }
        } else {
            return;
        }
        Statement stmt = Types.ancestor(from, Statement.class).orElse(null);
        if (stmt != null) {
            Entry e = add(
                    s,
                    "Spring Integration flow from " + source,
                    "integration",
                    owner(from) + " flow",
                    from,
                    stmt,
                    from);
            e.ackText = "the inbound adapter acknowledges after the flow returns";
        }
    }

    /**
     * A channel Spring Cloud Stream's annotation model binds to a destination: {@code channels.input()} where the
     * receiver's type is an interface of the repository whose method carries {@code @Input}, or {@code Sink.INPUT} /
     * {@code Processor.INPUT} in a file that declares {@code @EnableBinding}.
     */
    private boolean binderChannel(Repo.Source s, Expression arg) {
        if (arg instanceof FieldAccessExpr f) {
            return f.getNameAsString().equals("INPUT")
                    && f.getScope().toString().matches("Sink|Processor")
                    && s.text().contains("@EnableBinding");
        }
        if (!(arg instanceof MethodCallExpr call)
                || call.getScope().isEmpty()
                || !call.getArguments().isEmpty()) {
            return false;
        }
        String type = types.typeOf(call.getScope().get());
        if (type == null) {
            return false;
        }
        for (TypeDeclaration<?> t : repo.types(type, call)) {
            for (MethodDeclaration m : t.getMethodsByName(call.getNameAsString())) {
                if (Types.annotated(m.getAnnotations(), "Input")) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * The inbound adapter's factory call under the spec's configuration, as the Java DSL documents it: {@code
     * Jms.messageDrivenChannelAdapter(cf).destination("q")}, {@code Kafka.messageDrivenChannelAdapter(cf,
     * "t").configureListenerContainer(…)}, {@code Amqp.inboundAdapter(cf, "q").configureContainer(…)}.
     */
    private static MethodCallExpr inboundSpec(Expression arg) {
        for (Expression x = arg;
                x instanceof MethodCallExpr call;
                x = call.getScope().orElse(null)) {
            if (call.getNameAsString()
                            .matches("messageDrivenChannelAdapter|inboundAdapter|inboundGateway|inboundChannelAdapter"
                                    + "|messageDrivenAdapter")
                    // under a spec's configuration, only a broker's factory (Files.inboundAdapter(dir).patternFilter
                    // reads a directory)
                    && (call == arg
                            || call.getScope()
                                    .map(sc -> sc.toString().matches("Jms|Kafka|Amqp|RabbitStream|Mqtt|Sqs|Pulsar"))
                                    .orElse(false))) {
                return call;
            }
        }
        return null;
    }

    /** A side effect in a Kafka Streams topology: {@code stream.peek((k, v) -> mailer.send(v))}. */
    private void streamsSideEffect(Repo.Source s, MethodCallExpr call) {
        if (call.getArguments().size() != 1) {
            return;
        }
        boolean streams =
                s.cu().getImports().stream().anyMatch(i -> i.getNameAsString().startsWith("org.apache.kafka.streams"));
        if (streams
                && call.getArgument(0) instanceof MethodReferenceExpr ref
                && ref.getScope().isThisExpr()) {
            // .foreach(this::process): the class's own method is the side effect run per record
            TypeDeclaration<?> owner = Types.enclosingType(call);
            for (MethodDeclaration m :
                    owner == null ? List.<MethodDeclaration>of() : owner.getMethodsByName(ref.getIdentifier())) {
                if (m.getParameters().size() == 2) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(s, "Kafka Streams " + call.getNameAsString(), "kafka", owner(m), m, b, m);
                        e.ackText = "Kafka Streams commits the offset after the record is processed; exactly_once"
                                + " covers topics and state stores, not a side effect in " + call.getNameAsString();
                    });
                }
            }
            return;
        }
        if (!(call.getArgument(0) instanceof LambdaExpr l)) {
            return;
        }
        if (streams) {
            Entry e = add(
                    s,
                    "Kafka Streams " + call.getNameAsString(),
                    "kafka",
                    owner(call) + " " + call.getNameAsString(),
                    l,
                    l.getBody(),
                    l);
            e.ackText = "Kafka Streams commits the offset after the record is processed; exactly_once covers topics"
                    + " and state stores, not a side effect in " + call.getNameAsString();
        }
    }

    /**
     * Listeners created in code: an anonymous {@code RouteBuilder}, a {@code MessageListenerAdapter}
     * around a POJO (its {@code handleMessage}, or the method named), an anonymous JMS/AMQP listener.
     */
    private void created(Repo.Source s, ObjectCreationExpr oc) {
        String t = oc.getType().getNameAsString();
        var catalogued = oc.getAnonymousClassBody().isPresent() && CATALOGUE.names(EntryCatalogue.Shape.IMPLEMENTS, t)
                ? CATALOGUE.match(EntryCatalogue.Shape.IMPLEMENTS, t, s)
                : java.util.Optional.<EntryCatalogue.Rule>empty();
        if (catalogued.isPresent()) {
            EntryCatalogue.Rule r = catalogued.get();
            for (var member : oc.getAnonymousClassBody().get()) {
                if (member instanceof MethodDeclaration md
                        && md.getNameAsString().equals(r.method())
                        && md.getBody().isPresent()) {
                    catalogueEntry(s, r, owner(oc) + " " + t, md, md.getBody().get(), md);
                }
            }
            return;
        }
        if (oc.getAnonymousClassBody().isPresent()
                && (STREAMS_CALLBACKS.containsKey(t) || t.startsWith("MessageReceiver"))) {
            String method = t.startsWith("MessageReceiver") ? "receiveMessage" : STREAMS_CALLBACKS.get(t);
            for (var member : oc.getAnonymousClassBody().get()) {
                if (member instanceof MethodDeclaration md
                        && md.getNameAsString().equals(method)
                        && md.getBody().isPresent()) {
                    callbackObject(s, t, md, md.getBody().get(), md);
                }
            }
            return;
        }
        if (t.endsWith("MessageListener")
                && !t.equals("BatchMessageListener")
                && oc.getAnonymousClassBody().isPresent()
                && listenerBroker(s) != null) {
            for (var member : oc.getAnonymousClassBody().get()) {
                if (member instanceof MethodDeclaration md
                        && md.getNameAsString().equals("onMessage")
                        && md.getBody().isPresent()) {
                    listened(add(
                            s,
                            t + ".onMessage",
                            listenerBroker(s),
                            owner(oc) + " listener",
                            md,
                            md.getBody().get(),
                            md));
                }
            }
            return;
        }
        if (t.endsWith("RouteBuilder") && oc.getAnonymousClassBody().isPresent()) {
            camelRoutes(s, oc);
        } else if (t.equals("MessageListenerAdapter") && !oc.getArguments().isEmpty()) {
            Expression target = oc.getArgument(0);
            String type = target instanceof ObjectCreationExpr o ? o.getType().getNameAsString() : types.typeOf(target);
            String method = oc.getArguments().size() >= 2 && oc.getArgument(1) instanceof StringLiteralExpr lit
                    ? lit.getValue()
                    : adapterMethodSet(oc).orElse("handleMessage");
            if (type == null) {
                return;
            }
            boolean jms = s.cu().getImports().stream()
                    .anyMatch(i -> i.getNameAsString().contains(".jms."));
            for (TypeDeclaration<?> td : repo.types(type, oc)) {
                for (MethodDeclaration m : td.getMethodsByName(method)) {
                    m.getBody().ifPresent(b -> {
                        Entry e = add(
                                s,
                                "MessageListenerAdapter → " + type + "." + method,
                                jms ? "jms" : "rabbitmq",
                                owner(m),
                                m,
                                b,
                                m);
                        e.source = repo.sourceOf(m);
                        e.ackText = "the container acknowledges after the adapted method returns";
                    });
                }
            }
        }
    }

    /**
     * The delegate's method an adapter built with one argument is told to call after construction, as Spring's JMS and
     * AMQP guides configure it: {@code MessageListenerAdapter a = new MessageListenerAdapter(receiver);
     * a.setDefaultListenerMethod("receive")} in the same method (the adapter held in a local or a field).
     */
    private static Optional<String> adapterMethodSet(ObjectCreationExpr adapter) {
        String held = adapter.getParentNode()
                .filter(VariableDeclarator.class::isInstance)
                .map(p -> ((VariableDeclarator) p).getNameAsString())
                .or(() -> adapter.getParentNode()
                        .filter(com.github.javaparser.ast.expr.AssignExpr.class::isInstance)
                        .map(p -> ((com.github.javaparser.ast.expr.AssignExpr) p).getTarget())
                        .map(t -> t instanceof FieldAccessExpr f ? f.getNameAsString() : t.toString()))
                .orElse(null);
        Optional<MethodDeclaration> within = Types.ancestor(adapter, MethodDeclaration.class);
        if (held == null || within.isEmpty()) {
            return Optional.empty();
        }
        for (MethodCallExpr call : within.get().findAll(MethodCallExpr.class)) {
            if (call.getNameAsString().equals("setDefaultListenerMethod")
                    && call.getArguments().size() == 1
                    && call.getArgument(0) instanceof StringLiteralExpr name
                    && call.getScope()
                            .map(sc -> sc instanceof FieldAccessExpr f ? f.getNameAsString() : sc.toString())
                            .filter(held::equals)
                            .isPresent()) {
                return Optional.of(name.getValue());
            }
        }
        return Optional.empty();
    }

    /** Kafka Streams callbacks a topology runs per record, and the method each runs. */
    private static final Map<String, String> STREAMS_CALLBACKS = Map.of(
            "ValueMapper", "apply",
            "ValueMapperWithKey", "apply",
            "KeyValueMapper", "apply",
            "ValueTransformer", "transform",
            "ValueTransformerWithKey", "transform",
            "Transformer", "transform",
            "Processor", "process",
            "FixedKeyProcessor", "process",
            "ContextualProcessor", "process");

    private static void streamsCallback(Entry e) {
        e.ackText = "Kafka Streams commits the offset after the record is processed; exactly_once covers topics and"
                + " state stores, not a side effect in the callback";
    }

    /**
     * A callback interface a client library calls per message, written as an anonymous class ({@code
     * new MessageReceiver() {…}}, {@code () -> new Processor<>() {…}} in a topology) or as the lambda a
     * {@code @Bean} method returns ({@code @Bean MessageReceiver receiver() { return (m, c) -> …; }}).
     */
    private void callbackObject(Repo.Source s, String type, Node decl, Node body, Node at) {
        if (type.equals("MessageReceiver") || type.equals("MessageReceiverWithAckResponse")) {
            pubSubAck(add(s, "Pub/Sub " + type, "pubsub", owner(at) + " receiver", decl, body, at));
        } else if (STREAMS_CALLBACKS.containsKey(type)
                && s.cu().getImports().stream()
                        .anyMatch(i -> i.getNameAsString().startsWith("org.apache.kafka.streams"))) {
            streamsCallback(add(s, "Kafka Streams " + type, "kafka", owner(at) + " " + type, decl, body, at));
        }
    }

    /**
     * A Camel endpoint URI written as a literal, a concatenation starting with one, or a constant of the
     * class ({@code static final String ORDERS = "jms:queue:orders"}), or null.
     */
    /** {@code {{key}}} or {@code {{key:default}}}: a Camel property placeholder. */
    private static final Pattern CAMEL_PLACEHOLDER = Pattern.compile("\\{\\{([^}:]+)(?::([^}]*))?}}(.*)");

    /** {@code ${key}} or {@code ${key:default}} in a Spring {@code @Value}. */
    private static final Pattern SPRING_PLACEHOLDER = Pattern.compile("\\$\\{([^}:]+)(?::([^}]*))?}");

    /**
     * The endpoint URI a route starts from, as far as the code says it: a literal, a concatenation (its scheme is on
     * the left), a constant of the class or of another class, a field bound to configuration ({@code @Value("${…}")},
     * {@code @ConfigProperty}), a property placeholder ({@code {{orders.uri}}}) read from the module's
     * configuration, {@code String.format}, or the endpoint DSL's builder ({@code kafka("orders").brokers(…)}, whose
     * innermost call names the component in camel case).
     */
    String camelUri(Repo.Source s, Expression e) {
        return placeholder(s, camelUriExpr(s, e, 0));
    }

    private String camelUriExpr(Repo.Source s, Expression e, int depth) {
        if (depth > 8) { // a getter's return through a decorating helper to a constant of a base class is 7 deep
            return null;
        }
        if (e instanceof EnclosedExpr en) {
            return camelUriExpr(s, en.getInner(), depth + 1);
        }
        if (e instanceof com.github.javaparser.ast.expr.BinaryExpr b) {
            // "kafka:" + topic + "?…": the scheme is on the left; BROKER + ":" + queue names it in two parts
            String left = camelUriExpr(s, b.getLeft(), depth + 1);
            if (left != null
                    && !left.contains(":")
                    && b.getOperator() == com.github.javaparser.ast.expr.BinaryExpr.Operator.PLUS) {
                String right = camelUriExpr(s, b.getRight(), depth + 1);
                return right == null ? left : left + right;
            }
            return left;
        }
        if (e instanceof StringLiteralExpr lit) {
            return lit.getValue();
        }
        if (e instanceof com.github.javaparser.ast.expr.TextBlockLiteralExpr tb) {
            return tb.getValue().strip();
        }
        if (e instanceof NameExpr n) {
            return fieldUri(s, Types.enclosingType(n), n.getNameAsString(), depth);
        }
        if (e instanceof FieldAccessExpr fa && fa.getScope() instanceof NameExpr owner) {
            for (TypeDeclaration<?> t : repo.types(owner.getNameAsString(), fa)) {
                String v = fieldUri(s, t, fa.getNameAsString(), depth);
                if (v != null) {
                    return v;
                }
            }
            return null;
        }
        if (e instanceof MethodCallExpr call) {
            if (call.getNameAsString().equals("format") && !call.getArguments().isEmpty()) {
                return camelUriExpr(s, call.getArgument(0), depth + 1);
            }
            String returned = returnedUri(s, call, depth);
            if (returned != null) {
                return returned.isEmpty() ? null : returned; // a repository method: not the endpoint DSL below
            }
            // the endpoint DSL: kafka("orders").brokers("…") starts from the component's own method
            MethodCallExpr inner = call;
            while (inner.getScope().isPresent() && inner.getScope().get() instanceof MethodCallExpr up) {
                inner = up;
            }
            if (inner.getScope().isEmpty()
                    && Character.isLowerCase(inner.getNameAsString().charAt(0))) {
                return inner.getNameAsString()
                                .replaceAll("([a-z0-9])([A-Z])", "$1-$2")
                                .toLowerCase(Locale.ROOT)
                        + ":…";
            }
        }
        return null;
    }

    /**
     * The URI a method of the repository returns, for {@code from(config.getNodeIndex())}: an options bean's getter
     * ({@code return BROKER + ":" + nodeQueue;}), or a helper that decorates the URI it is given with options
     * ({@code withConsumers(uri)}, whose own return starts from its parameter): then the scheme is its first
     * argument's. The method is the one of the call's scope type (or of the calling class and its bases, unscoped)
     * with as many parameters as the call has arguments. Empty when the method is the repository's and says no URI;
     * null when the repository declares no such method.
     */
    private String returnedUri(Repo.Source s, MethodCallExpr call, int depth) {
        List<TypeDeclaration<?>> owners = new ArrayList<>();
        if (call.getScope().isEmpty() || call.getScope().get() instanceof com.github.javaparser.ast.expr.ThisExpr) {
            for (TypeDeclaration<?> t = Types.enclosingType(call); t != null; t = superOf(t)) {
                owners.add(t);
            }
        } else {
            String type = types.typeOf(call.getScope().get());
            if (type == null || !types.isRepoType(type)) {
                return null;
            }
            for (TypeDeclaration<?> t : repo.types(type, call)) {
                for (TypeDeclaration<?> up = t; up != null && owners.size() < 8; up = superOf(up)) {
                    owners.add(up);
                }
            }
        }
        for (TypeDeclaration<?> owner : owners) {
            for (MethodDeclaration m : owner.getMethodsByName(call.getNameAsString())) {
                if (m.getParameters().size() != call.getArguments().size()
                        || m.getBody().isEmpty()) {
                    continue;
                }
                List<ReturnStmt> returns = m.getBody().get().findAll(ReturnStmt.class);
                if (returns.size() == 1 && returns.get(0).getExpression().isPresent()) {
                    String returned =
                            camelUriExpr(s, returns.get(0).getExpression().get(), depth + 1);
                    if (returned != null) {
                        return returned;
                    }
                }
                String v = call.getArguments().isEmpty() ? null : camelUriExpr(s, call.getArgument(0), depth + 1);
                return v == null ? "" : v;
            }
        }
        return null;
    }

    /** The class a repository class extends, when the repository declares it. */
    private TypeDeclaration<?> superOf(TypeDeclaration<?> t) {
        if (t instanceof ClassOrInterfaceDeclaration c && !c.getExtendedTypes().isEmpty()) {
            List<TypeDeclaration<?>> up = repo.types(c.getExtendedTypes().get(0).getNameAsString(), c);
            return up.isEmpty() || up.get(0) == t ? null : up.get(0);
        }
        return null;
    }

    /** A field's URI: its initializer, or the configuration key it is bound to (the field declared here or above). */
    private String fieldUri(Repo.Source s, TypeDeclaration<?> t, String name, int depth) {
        if (t == null) {
            return null;
        }
        var field = t.getFieldByName(name).orElse(null);
        int above = 0;
        for (TypeDeclaration<?> up = superOf(t); field == null && up != null && above < 4; up = superOf(up), above++) {
            field = up.getFieldByName(name).orElse(null);
        }
        if (field == null) {
            return null;
        }
        var init = field.getVariable(0).getInitializer();
        if (init.isPresent()) {
            return camelUriExpr(s, init.get(), depth + 1);
        }
        for (AnnotationExpr a : field.getAnnotations()) {
            String n = a.getName().getIdentifier();
            String v = null;
            if (n.equals("Value")
                    && a instanceof com.github.javaparser.ast.expr.SingleMemberAnnotationExpr sm
                    && sm.getMemberValue() instanceof StringLiteralExpr lit) {
                Matcher m = SPRING_PLACEHOLDER.matcher(lit.getValue());
                if (m.matches()) {
                    v = configured(s, m.group(1), m.group(2));
                }
            } else if (n.equals("ConfigProperty")
                    && a instanceof com.github.javaparser.ast.expr.NormalAnnotationExpr na) {
                String key = null;
                String dflt = null;
                for (var p : na.getPairs()) {
                    if (p.getValue() instanceof StringLiteralExpr lit) {
                        if (p.getNameAsString().equals("name")) {
                            key = lit.getValue();
                        } else if (p.getNameAsString().equals("defaultValue")) {
                            dflt = lit.getValue();
                        }
                    }
                }
                v = key == null ? null : configured(s, key, dflt);
            }
            if (v != null) {
                return v;
            }
        }
        if (field.getParentNode().orElse(null) instanceof TypeDeclaration<?> holder) {
            String bound = propertiesBound(s, holder, name);
            return bound != null ? bound : constructedUri(holder, name, depth);
        }
        return null;
    }

    /**
     * A field of a {@code @ConfigurationProperties(prefix = "app")} class: the value configured under the prefix and the
     * field's name, as Spring's relaxed binding reads it ({@code app.inputUri} or {@code app.input-uri}).
     */
    private String propertiesBound(Repo.Source s, TypeDeclaration<?> holder, String field) {
        AnnotationExpr a = Types.annotation(holder.getAnnotations(), "ConfigurationProperties")
                .orElse(null);
        if (a == null) {
            return null;
        }
        String prefix = null;
        if (a instanceof com.github.javaparser.ast.expr.SingleMemberAnnotationExpr sm
                && sm.getMemberValue() instanceof StringLiteralExpr lit) {
            prefix = lit.getValue();
        } else if (a instanceof com.github.javaparser.ast.expr.NormalAnnotationExpr na) {
            for (var p : na.getPairs()) {
                if (p.getNameAsString().matches("prefix|value") && p.getValue() instanceof StringLiteralExpr lit) {
                    prefix = lit.getValue();
                }
            }
        }
        if (prefix == null) {
            return null;
        }
        String kebab = field.replaceAll("([a-z0-9])([A-Z])", "$1-$2").toLowerCase(Locale.ROOT);
        String v = configured(s, prefix + "." + field, null);
        return v != null ? v : configured(s, prefix + "." + kebab, null);
    }

    /**
     * A field its constructor sets from a parameter ({@code inputStream = inputSource}): the URI the code creating the
     * class passes in that place ({@code new DerivativeConnector(name, finalInput, …)}, a local read where it is
     * declared), the first that says one.
     */
    private String constructedUri(TypeDeclaration<?> t, String field, int depth) {
        for (com.github.javaparser.ast.body.ConstructorDeclaration k : t.getConstructors()) {
            for (com.github.javaparser.ast.expr.AssignExpr a :
                    k.findAll(com.github.javaparser.ast.expr.AssignExpr.class)) {
                boolean toField = a.getTarget() instanceof FieldAccessExpr fa
                                && fa.getScope() instanceof com.github.javaparser.ast.expr.ThisExpr
                                && fa.getNameAsString().equals(field)
                        || a.getTarget() instanceof NameExpr n
                                && n.getNameAsString().equals(field)
                                && k.getParameterByName(field).isEmpty();
                if (!toField || !(a.getValue() instanceof NameExpr v)) {
                    continue;
                }
                int place = k.getParameters()
                        .indexOf(k.getParameterByName(v.getNameAsString()).orElse(null));
                if (place < 0) {
                    continue;
                }
                String type = t.getNameAsString();
                repo.parseHolding(List.of("new " + type + "("));
                for (Repo.Source src : repo.sources()) {
                    if (!src.text().contains("new " + type + "(")) {
                        continue;
                    }
                    for (ObjectCreationExpr oc : src.cu()
                            .findAll(
                                    ObjectCreationExpr.class,
                                    x -> x.getType().getNameAsString().equals(type)
                                            && x.getArguments().size()
                                                    == k.getParameters().size())) {
                        Expression arg = oc.getArgument(place);
                        if (arg instanceof NameExpr local) {
                            arg = Types.ancestor(oc, com.github.javaparser.ast.body.CallableDeclaration.class)
                                    .flatMap(m -> m
                                            .findAll(
                                                    VariableDeclarator.class,
                                                    d -> d.getNameAsString().equals(local.getNameAsString()))
                                            .stream()
                                            .findFirst())
                                    .flatMap(VariableDeclarator::getInitializer)
                                    .orElse(arg);
                        }
                        String uri = camelUriExpr(src, arg, depth + 1);
                        if (uri != null) {
                            return uri;
                        }
                    }
                }
            }
        }
        return null;
    }

    /** A configuration value of the source's module, else the placeholder's default. */
    private String configured(Repo.Source s, String key, String otherwise) {
        Settings.Setting st = settings.get(s, key.strip());
        return st != null ? st.value() : otherwise;
    }

    /** A URI that is a Camel property placeholder, replaced by its configured value (or default). */
    private String placeholder(Repo.Source s, String uri) {
        if (uri == null) {
            return null;
        }
        Matcher m = CAMEL_PLACEHOLDER.matcher(uri.strip());
        if (!m.matches()) {
            return uri;
        }
        String v = configured(s, m.group(1), m.group(2));
        return v == null ? null : v + m.group(3);
    }

    /**
     * Google Cloud Pub/Sub callbacks: the receiver of {@code Subscriber.newBuilder(subscription,
     * receiver)} and the consumer of Spring Cloud GCP's {@code PubSubTemplate.subscribe(subscription,
     * consumer)}, as a lambda in place or in a local variable.
     */
    private void pubSubCallback(Repo.Source s, MethodCallExpr call) {
        String scope = call.getScope().map(Node::toString).orElse("");
        String t = call.getScope().map(types::typeOf).orElse("");
        boolean client = call.getNameAsString().equals("newBuilder")
                && (scope.equals("Subscriber") || scope.endsWith(".Subscriber"));
        boolean template = (call.getNameAsString().equals("subscribe")
                        || call.getNameAsString().equals("subscribeAndConvert"))
                && (t.equals("PubSubTemplate")
                        || t.equals("PubSubSubscriberTemplate")
                        || t.equals("PubSubSubscriberOperations"));
        if ((!client && !template) || call.getArguments().size() < 2) {
            return;
        }
        Expression a = call.getArgument(1);
        Node[] receiver = a instanceof NameExpr n && lambdaOf(n).isPresent()
                ? new Node[] {lambdaOf(n).get(), lambdaOf(n).get().getBody()}
                : callback(a, client ? 2 : 1);
        if (receiver == null) {
            return;
        }
        Entry e = add(
                s,
                client ? "Pub/Sub Subscriber MessageReceiver" : "Spring Cloud GCP PubSubTemplate.subscribe",
                "pubsub",
                owner(call) + " receiver",
                receiver[0],
                receiver[1],
                call);
        pubSubAck(e);
    }

    /**
     * The handler a client library is given, as its declaration and body: a lambda, or a method
     * reference to a method of the repository taking {@code arity} arguments ({@code this::onOrder},
     * {@code handlers::onOrder} on a field, {@code OrderHandler::onOrder} on a type), so a handler
     * written as a method is traced like one written inline. Null for anything else.
     */
    private Node[] callback(Expression given, int arity) {
        Expression a = unwrapped(given);
        if (a instanceof NameExpr n && lambdaOf(n).isPresent()) {
            a = lambdaOf(n).get(); // a handler held in a local or a field
        }
        if (a instanceof LambdaExpr l) {
            return new Node[] {l, l.getBody()};
        }
        if (!(a instanceof MethodReferenceExpr ref)) {
            return null;
        }
        List<MethodDeclaration> targets;
        if (ref.getScope() instanceof com.github.javaparser.ast.expr.ThisExpr) {
            TypeDeclaration<?> owner = Types.enclosingType(ref);
            targets = owner == null ? List.of() : owner.getMethodsByName(ref.getIdentifier());
        } else {
            String type = types.typeOf(ref.getScope());
            targets = repo.methods(type != null ? type : ref.getScope().toString(), ref.getIdentifier(), arity, ref);
        }
        for (MethodDeclaration m : targets) {
            if (m.getParameters().size() == arity && m.getBody().isPresent()) {
                return new Node[] {m, m.getBody().get()};
            }
        }
        return null;
    }

    /**
     * A Vert.x Kafka consumer's record handler: {@code KafkaConsumer.create(vertx, props).handler(record -> …)}, on a
     * variable of that type, or on a method returning one; the handler a lambda, a method reference, or a call to a
     * method of the class that returns the lambda ({@code .handler(eventHandler())}). The client polls in its own loop
     * and commits on Kafka's auto-commit timer unless the code commits itself.
     */
    private void vertxKafka(Repo.Source s, MethodCallExpr call) {
        if (call.getArguments().size() != 1
                || s.cu().getImports().stream()
                        .noneMatch(i -> i.getNameAsString().startsWith("io.vertx.kafka.client.consumer"))) {
            return;
        }
        Expression scope = call.getScope().orElse(null);
        String type = scope == null ? null : types.typeOf(scope);
        boolean consumer = "KafkaConsumer".equals(type)
                || "KafkaReadStream".equals(type)
                || scope instanceof MethodCallExpr create
                        && create.getNameAsString().equals("create")
                        && create.getScope().map(Node::toString).orElse("").equals("KafkaConsumer");
        if (!consumer) {
            return;
        }
        Node[] handler = callback(call.getArgument(0), 1);
        if (handler == null) {
            handler = returnedLambda(call.getArgument(0));
        }
        if (handler == null) {
            return;
        }
        Entry e = add(
                s,
                "Vert.x KafkaConsumer handler",
                "kafka",
                owner(call) + " handler",
                handler[0],
                handler[1],
                handler[0]);
        if (s.text().contains(".commit(")) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackCalls = Set.of("commit");
            e.ackText =
                    "consumer.commit() in the code; records not committed are read again after a restart or rebalance";
        } else {
            e.ack = Entry.Ack.AUTO;
            e.timerCommit = true;
            e.ackText = "the Vert.x consumer commits on Kafka's auto-commit timer (enable.auto.commit), whatever the"
                    + " handler did";
        }
    }

    /** The lambda a method of the class returns, for a handler given as {@code handler(eventHandler())}. */
    /**
     * The Vert.x RabbitMQ client's {@code RabbitMQConsumer.handler(msg -> …)} (the consumer a {@code basicConsumer}
     * callback is given) and the Vert.x AMQP client's {@code AmqpReceiver.handler(msg -> …)}: typed by the receiver,
     * or by the {@code basicConsumer}/{@code createReceiver} callback whose result it is.
     */
    private void vertxReceiver(Repo.Source s, MethodCallExpr call) {
        if (call.getArguments().size() != 1 || call.getScope().isEmpty()) {
            return;
        }
        String t = types.typeOf(call.getScope().get());
        String registration = Types.ancestor(call, MethodCallExpr.class)
                .map(MethodCallExpr::getNameAsString)
                .orElse("");
        boolean rabbit = "RabbitMQConsumer".equals(t) || t == null && registration.equals("basicConsumer");
        boolean amqp = "AmqpReceiver".equals(t) || t == null && registration.equals("createReceiver");
        if (!rabbit && !amqp
                || s.cu().getImports().stream()
                        .noneMatch(i -> i.getNameAsString().startsWith("io.vertx"))) {
            return;
        }
        Node[] handler = callback(call.getArgument(0), 1);
        if (handler == null) {
            return;
        }
        Entry e = add(
                s,
                rabbit ? "Vert.x RabbitMQConsumer.handler" : "Vert.x AmqpReceiver.handler",
                rabbit ? "rabbitmq" : "amqp",
                owner(call) + " handler",
                handler[0],
                handler[1],
                call);
        e.ack = Entry.Ack.AUTO;
        e.ackText = rabbit
                ? "the Vert.x RabbitMQ consumer acknowledges on delivery unless QueueOptions.setAutoAck(false)"
                        + " (then client.basicAck in the handler)"
                : "the Vert.x AMQP receiver accepts the message on delivery unless auto-acknowledgement is off"
                        + " (then message.accepted() in the handler)";
        String module = s.text();
        if (module.contains("setAutoAck(false)") || module.contains("setAutoAcknowledgement(false)")) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackCalls = Set.of("basicAck", "basicNack", "accepted", "rejected", "released", "modified");
        }
    }

    private static Node[] returnedLambda(Expression a) {
        if (!(a instanceof MethodCallExpr m)
                || m.getScope()
                        .filter(x -> !(x instanceof com.github.javaparser.ast.expr.ThisExpr))
                        .isPresent()) {
            return null;
        }
        TypeDeclaration<?> owner = Types.enclosingType(m);
        if (owner == null) {
            return null;
        }
        for (MethodDeclaration d : owner.getMethodsByName(m.getNameAsString())) {
            if (d.getParameters().size() != m.getArguments().size()) {
                continue;
            }
            for (ReturnStmt r : d.findAll(ReturnStmt.class)) {
                if (r.getExpression().orElse(null) instanceof LambdaExpr l) {
                    return new Node[] {l, l.getBody()};
                }
            }
        }
        return null;
    }

    /** {@code .handler(((client, job) -> …))} or a cast to the handler's interface: the expression inside is the handler. */
    private static Expression unwrapped(Expression a) {
        Expression x = a;
        while (x instanceof CastExpr || x instanceof EnclosedExpr) {
            x = x instanceof CastExpr ce ? ce.getExpression() : ((EnclosedExpr) x).getInner();
        }
        return x;
    }

    private static boolean zeebe(Repo.Source s) {
        return s.cu().getImports().stream().anyMatch(i -> {
            String q = i.getNameAsString();
            return q.startsWith("io.camunda") || q.startsWith("io.zeebe");
        });
    }

    /** {@code client.newWorker().jobType(…).handler(…)} given a lambda or a method reference. */
    private void zeebeWorker(Repo.Source s, MethodCallExpr call) {
        if (call.getArguments().size() != 1
                || !call.getScope().map(Node::toString).orElse("").contains("newWorker()")) {
            return;
        }
        Node[] handler = callback(call.getArgument(0), 2);
        if (handler != null) {
            zeebeHandlerAck(
                    add(s, "Zeebe JobHandler", "zeebe", owner(call) + " handler", handler[0], handler[1], call));
        } else {
            forwarded(call.getArgument(0));
        }
    }

    /** A repository method that passes its parameter (at {@code index}) on to where a library registers a handler. */
    private record Forwarder(String owner, String method, int arity, int index) {}

    private final List<Forwarder> forwarders = new ArrayList<>();

    /**
     * The handler given to the worker is a parameter of the method around the call (a base class's
     * {@code newWorker(type, JobHandler handler)}): that method is a helper, and what its callers pass in that place
     * is the handler ({@link #forwardedHandlers}).
     */
    private boolean forwarded(Expression given) {
        if (!(unwrapped(given) instanceof NameExpr n)) {
            return false;
        }
        MethodDeclaration m = Types.ancestor(n, MethodDeclaration.class).orElse(null);
        TypeDeclaration<?> owner = m == null ? null : Types.enclosingType(m);
        if (owner == null
                || !m.findAll(VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))
                        .isEmpty()) {
            return false;
        }
        for (int i = 0; i < m.getParameters().size(); i++) {
            if (m.getParameter(i).getNameAsString().equals(n.getNameAsString())) {
                Forwarder f = new Forwarder(
                        owner.getNameAsString(),
                        m.getNameAsString(),
                        m.getParameters().size(),
                        i);
                if (!forwarders.contains(f)) {
                    forwarders.add(f);
                }
                return true;
            }
        }
        return false;
    }

    /**
     * The handlers given to a helper found by {@link #forwarded}: a lambda or method reference passed in the
     * forwarded place by a call on the helper's class, from it or a class below it (its subclasses are parsed for
     * this), is a Zeebe job handler where it is written; a helper that passes its own parameter on to another is
     * followed the same way, three helpers deep at most. A helper whose parameter is only run is no forwarder.
     */
    private void forwardedHandlers() {
        int done = 0;
        for (int round = 0; round < 3 && done < forwarders.size(); round++) {
            List<Forwarder> todo = new ArrayList<>(forwarders.subList(done, forwarders.size()));
            done = forwarders.size();
            Set<String> owners = new java.util.HashSet<>();
            todo.forEach(f -> owners.add(f.owner()));
            repo.parseExtending(owners);
            Map<String, String> superOf = new HashMap<>();
            for (Repo.Source s : repo.sources()) {
                for (ClassOrInterfaceDeclaration c : s.cu().findAll(ClassOrInterfaceDeclaration.class)) {
                    c.getExtendedTypes().stream()
                            .findFirst()
                            .ifPresent(t -> superOf.putIfAbsent(c.getNameAsString(), t.getNameAsString()));
                }
            }
            for (Repo.Source s : List.copyOf(repo.sources())) {
                for (MethodCallExpr call : s.cu().findAll(MethodCallExpr.class)) {
                    for (Forwarder f : todo) {
                        if (call.getNameAsString().equals(f.method())
                                && call.getArguments().size() == f.arity()
                                && onOwner(call, f.owner(), superOf)) {
                            Expression a = call.getArgument(f.index());
                            Node[] handler = callback(a, 2);
                            if (handler != null) {
                                zeebeHandlerAck(add(
                                        s,
                                        "Zeebe JobHandler",
                                        "zeebe",
                                        owner(call) + " " + f.method() + " handler",
                                        handler[0],
                                        handler[1],
                                        call));
                            } else {
                                forwarded(a);
                            }
                        }
                    }
                }
            }
        }
    }

    /** The call is made on the helper's class: unscoped, on this or super, or on a value of that type, in it or below. */
    private boolean onOwner(MethodCallExpr call, String owner, Map<String, String> superOf) {
        Expression scope = call.getScope().orElse(null);
        String type;
        if (scope == null
                || scope instanceof com.github.javaparser.ast.expr.ThisExpr
                || scope instanceof com.github.javaparser.ast.expr.SuperExpr) {
            TypeDeclaration<?> t = Types.enclosingType(call);
            type = t == null ? null : t.getNameAsString();
        } else {
            type = types.typeOf(scope);
        }
        for (int depth = 0; type != null && depth < 6; depth++) {
            if (type.equals(owner)) {
                return true;
            }
            type = superOf.get(type);
        }
        return false;
    }

    /**
     * A plain client's handler completes the job itself ({@code client.newCompleteCommand(job)…send()}); a job not
     * completed within its timeout is activated again, at another worker too.
     */
    private static void zeebeHandlerAck(Entry e) {
        if (e.body.toString().contains("newCompleteCommand")) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackText = "client.newCompleteCommand(job) in the handler; a job not completed within its timeout is"
                    + " activated again";
        } else {
            e.ackText = "the job is completed by the worker after the handler returns; a crash or timeout activates it"
                    + " again";
        }
    }

    private static void pubSubAck(Entry e) {
        e.ack = Entry.Ack.EXPLICIT;
        e.ackText = "ack() on the AckReplyConsumer (or the acknowledgeable message) in the receiver";
    }

    /** The innermost loop around the call, or the method body when there is none. */
    static Node loopOrMethod(Node call) {
        for (Node n = call.getParentNode().orElse(null);
                n != null;
                n = n.getParentNode().orElse(null)) {
            if (n instanceof ForEachStmt fe && fe.getIterable().containsWithinRange(call)) {
                continue; // for (r : consumer.poll(d)): the loop around this one is the consumer's
            }
            if (n instanceof WhileStmt || n instanceof ForStmt || n instanceof DoStmt || n instanceof ForEachStmt) {
                return n;
            }
            if (n instanceof MethodDeclaration md) {
                return md.getBody().orElse(null);
            }
            if (n instanceof LambdaExpr l) {
                return l.getBody();
            }
        }
        return null;
    }
}
