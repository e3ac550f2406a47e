package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.NodeList;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.AnnotationExpr;
import com.github.javaparser.ast.expr.AssignExpr;
import com.github.javaparser.ast.expr.BinaryExpr;
import com.github.javaparser.ast.expr.ClassExpr;
import com.github.javaparser.ast.expr.ConditionalExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.LambdaExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.MethodReferenceExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.ObjectCreationExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import com.github.javaparser.ast.stmt.BlockStmt;
import com.github.javaparser.ast.stmt.ExpressionStmt;
import com.github.javaparser.ast.stmt.IfStmt;
import com.github.javaparser.ast.stmt.ReturnStmt;
import com.github.javaparser.ast.stmt.Statement;
import com.github.javaparser.ast.stmt.TryStmt;
import com.github.javaparser.ast.stmt.WhileStmt;
import com.github.javaparser.ast.type.Type;
import dev.once.scan.Blast;
import dev.once.scan.Location;
import dev.once.scan.Step;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Walks the flow of one entry point in execution order, into the repository's own methods up to
 * {@link #MAX_DEPTH} calls deep, and records what it does: effects, acknowledgements, claims,
 * checks, remote calls, transactions.
 */
final class Tracer {

    static final int MAX_DEPTH = 8;

    static final Pattern MONEY = Pattern.compile(
            "(?i).*(charge|capture|refund|transfer|payout|payment|withdraw|debit|credit|balance|amount|wallet|funds|money|ledger|cards?\\b|accounts?\\b|pay\\b|pay[A-Z(]).*");
    private static final Pattern MONEY_VERB = Pattern.compile(
            "(charge|capture|refund|transfer|payout|pay|create|confirm|authorize|debit|credit|withdraw|deposit|submit)\\w*");
    static final Pattern NOTIFY = Pattern.compile("(?i).*(mail|sms|notif|push|text message|twilio|sendgrid).*");
    private static final Pattern DEDUPE_TABLE = Pattern.compile(
            "(?i).*(processed|inbox|dedup|received_messages|idempot|handled|consumed|seen_events|message_log).*");
    private static final Pattern MONEY_TABLE =
            Pattern.compile("(?i).*(payment|charge|transfer|ledger|refund|payout|balance|wallet).*");
    private static final Pattern CHECK = Pattern.compile(
            "(exists|existsBy\\w*|findBy\\w*|findOneBy\\w*|countBy\\w*|getBy\\w*|selectBy\\w*|isProcessed\\w*|alreadyProcessed\\w*|wasProcessed\\w*|isDuplicate\\w*|hasBeenProcessed\\w*|hasKey|isMember|sismember|exists\\w*|getStatus|getState|isProcessed|isPaid|isCancelled|isCompleted)");
    /**
     * A column moved by a delta: {@code SET n = n + 1}, or a counter kept in a JSON document read, cast and moved
     * ({@code jsonb || jsonb_build_object('processedCount', (jsonb->>'processedCount')::int + 1)}, group 2).
     */
    private static final Pattern COUNTER_SQL = Pattern.compile(
            "(?i)set\\s.*?(?:\\b(\\w+)\\s*=\\s*\\1\\s*[-+]|\\(\\s*\\w+\\s*->>?\\s*'(\\w+)'\\s*\\)\\s*::\\s*\\w+\\s*[-+])");

    private static final Pattern INSERT = Pattern.compile("(?i)insert\\s+(?:ignore\\s+)?into\\s+([\\w.\"`]+)");
    private static final Pattern CYPHER_CREATE = Pattern.compile("(?i)\\bCREATE\\s*\\(");
    // a table named at run time (a tenant's schema formatted in: UPDATE %s SET) reads as ? where the name is unknown
    private static final Pattern UPDATE = Pattern.compile("(?i)update\\s+([\\w.\"`?]+)\\s+set\\s");
    private static final Pattern GUARD_WHERE =
            Pattern.compile("(?i)where.*\\b(status|state|version|processed|\\w+_at\\s+is\\s+null)\\b");

    private static final Set<String> ONCE_TYPES = Set.of(
            "IdempotentConsumer",
            "KafkaConsumerRunner",
            "RabbitConsumer",
            "SqsConsumer",
            "NatsConsumer",
            "SqsLambdaHandler");
    private static final Set<String> KAFKA_CONSUMERS = Set.of("KafkaConsumer", "Consumer", "MockConsumer");
    /** A share group's consumers (KIP-932): acknowledge(record, type) accepts a record, commitSync sends it. */
    private static final Set<String> SHARE_CONSUMERS =
            Set.of("ShareConsumer", "KafkaShareConsumer", "MockShareConsumer");

    private static final Set<String> SQS =
            Set.of("SqsClient", "SqsAsyncClient", "AmazonSQS", "AmazonSQSClient", "AmazonSQSAsync", "SqsTemplate");
    private static final Set<String> PUBLISHERS = Set.of(
            "KafkaTemplate",
            "KafkaProducer",
            "Producer",
            "RabbitTemplate",
            "AmqpTemplate",
            "RabbitOperations",
            "StreamBridge",
            "JmsTemplate",
            // the JMS API's own senders, used by hand-written receive loops
            "MessageProducer",
            "JMSProducer",
            "SqsTemplate",
            "KafkaOperations",
            "Channel",
            "JetStream",
            // Pulsar's fluent message: producer.newMessage().key(k).value(v).send()
            "TypedMessageBuilder");
    /**
     * A library's wrapper of a broker's template, named for what it wraps (eGov's {@code CustomKafkaTemplate}, a
     * {@code TracingKafkaTemplate}): it publishes as the template does. Only the template and producer names, which
     * say their broker; a bare {@code Producer} or {@code Channel} suffix says nothing.
     */
    private static boolean publisher(String type) {
        return PUBLISHERS.contains(type)
                || type.matches("\\w+(KafkaTemplate|RabbitTemplate|AmqpTemplate|JmsTemplate|SqsTemplate|KafkaProducer)")
                || BROKER_TEMPLATE.matcher(type).matches();
    }

    /**
     * The Spring-style template (or producer) of a broker, named for the broker it sends to: Spring's own
     * ({@code JmsMessagingTemplate}, {@code RabbitMessagingTemplate}, {@code RabbitStreamTemplate}, {@code
     * PulsarTemplate}, {@code ReactiveKafkaProducerTemplate}), Spring Cloud AWS's and Azure's ({@code SnsTemplate},
     * {@code QueueMessagingTemplate}, {@code NotificationMessagingTemplate}, {@code ServiceBusTemplate}, {@code
     * EventHubsTemplate}), RocketMQ's ({@code RocketMQTemplate}, {@code DefaultMQProducer}) and Pulsar's and Kinesis'
     * producers. A whole family by its name rather than a list of the ones seen: the other rules read a template as
     * judged elsewhere, so one missing here sent nothing. A STOMP {@code SimpMessagingTemplate} writes to web sockets,
     * not to a broker that keeps the message.
     */
    private static final Pattern BROKER_TEMPLATE = Pattern.compile("(?!Simp)\\w*(Kafka|Rabbit|Amqp|Jms|Sqs|Sns|Pulsar"
            + "|RocketMQ|RocketMq|Mq|MQ|ServiceBus|EventHubs?|Kinesis|Nats|Stream|Queue|Notification|Messaging)\\w*"
            + "Template|\\w*(MQ|Pulsar|Kinesis)Producer");

    /** A publish addressed to the request's reply-to. */
    private static final Pattern REPLY_CALL = Pattern.compile("(?s).*get(JMS)?ReplyTo\\(.*");
    /** The handler copies the request's correlation id onto what it sends. */
    private static final Pattern REPLY_MEMBER = Pattern.compile(
            "(?s).*[cC]orrelation[-_]?[iI][dD]\\s*\\(\\s*\\w+(\\.\\w+\\(\\))*\\.get(JMS)?Correlation[iI][dD]\\(\\).*");

    private static final Set<String> KAFKA_TEMPLATES = Set.of("KafkaTemplate", "KafkaOperations");
    private static final Set<String> JMS_TEMPLATES = Set.of("JmsTemplate", "JmsOperations", "JmsMessagingTemplate");
    private static final Set<String> PUBLISH_NAMES = Set.of(
            "send",
            "convertAndSend",
            "sendAndReceive",
            "sendDefault",
            "basicPublish",
            "publish",
            "publishAsync",
            "sendMessage",
            "sendMessageBatch",
            // the asynchronous and ordered sends of the same templates and producers (RocketMQ, Pulsar, SmallRye)
            "sendAsync",
            "syncSend",
            "asyncSend",
            "sendOneWay",
            "syncSendOrderly",
            "asyncSendOrderly",
            "sendMessageInTransaction",
            "sendAndConvert",
            "convertSendAndReceive",
            "sendNotification");
    private static final Set<String> NOTIFIERS = Set.of(
            "JavaMailSender",
            "MailSender",
            "SesClient",
            "SesV2Client",
            "AmazonSimpleEmailService",
            "SnsClient",
            "AmazonSNS",
            "SendGrid",
            "TwilioRestClient",
            "FirebaseMessaging",
            "Transport",
            "EmailSender",
            "SmsSender");
    private static final Set<String> MONEY_SDK = Set.of(
            "Stripe",
            "StripeClient",
            "PaymentIntent",
            "Charge",
            "Refund",
            "Transfer",
            "Payout",
            "BraintreeGateway",
            "PaymentGateway",
            "PaymentProvider",
            "PaymentClient",
            "PaymentsApi",
            "Checkout",
            "AdyenClient",
            "PayPalHttpClient");
    private static final Set<String> REST = Set.of("RestTemplate", "RestOperations", "TestRestTemplate");
    private static final Set<String> FLUENT_HTTP = Set.of("WebClient", "RestClient");
    private static final Set<String> APACHE_HTTP = Set.of(
            "CloseableHttpClient", "HttpClient", "DefaultHttpClient", "CloseableHttpAsyncClient", "MinimalHttpClient");
    /** An Apache HttpClient request that writes: {@code new HttpPost(…)}, or a request builder's {@code post(…)}. */
    private static final Pattern APACHE_WRITE = Pattern.compile("(?s).*(new\\s+Http(Post|Put|Patch)\\s*\\("
            + "|(ClassicRequestBuilder|SimpleRequestBuilder|RequestBuilder|Request)\\s*\\.\\s*(post|put|patch)\\s*\\()"
            + ".*");

    private static final Set<String> CACHES = Set.of(
            "Cache",
            "RedisTemplate",
            "StringRedisTemplate",
            "ValueOperations",
            "HashOperations",
            "Jedis",
            "RedisCommands",
            "JedisPool",
            "CacheManager",
            "ReactiveRedisTemplate",
            "RMap",
            "RBucket",
            "LoadingCache");

    private static final List<String> TIMEOUT_WORDS = List.of(
            "setReadTimeout",
            "readTimeout",
            "responseTimeout",
            "setConnectTimeout",
            "connectTimeout",
            "callTimeout",
            ".timeout(",
            "ReadTimeout",
            "SocketTimeout");

    private final Repo repo;
    private final Types types;
    private final Schema schema;
    private final Map<Path, Boolean> timeoutsConfigured = new HashMap<>();
    private Entry entry;
    private List<Event> events;
    private List<Engine.Span> spans;
    private Map<Event, List<Event>> finallyAcks;
    private int seq;
    private int txIds;

    Tracer(Repo repo, Types types, Schema schema) {
        this.repo = repo;
        this.types = types;
        this.schema = schema;
        this.constants = new Constants(repo);
        for (Repo.RawFile f : repo.rawFiles()) {
            if (TIMEOUT_WORDS.stream().anyMatch(f.text()::contains)) {
                timeoutsConfigured.put(repo.moduleOf(f.file()), true);
            }
        }
    }

    /**
     * The methods on the walk's stack (at most {@link #MAX_DEPTH}), each hashed once. Equality stays
     * structural as a {@code HashSet} of nodes had it (an identical copy of a method on the stack is not
     * walked again), but a javaparser node's hashCode walks its whole tree, and the set used to be copied
     * and every member rehashed at each call entered: a tenth of a large repository's scan.
     */
    private record Visiting(MethodDeclaration method, int hash, Visiting outer) {
        private static final com.github.javaparser.ast.DataKey<Integer> HASH =
                new com.github.javaparser.ast.DataKey<>() {};

        static Visiting of(MethodDeclaration m) {
            return m == null ? null : new Visiting(m, hash(m), null);
        }

        static boolean contains(Visiting v, MethodDeclaration m) {
            int h = hash(m);
            for (; v != null; v = v.outer) {
                if (v.hash == h && (v.method == m || v.method.equals(m))) {
                    return true;
                }
            }
            return false;
        }

        static Visiting with(Visiting v, MethodDeclaration m) {
            return new Visiting(m, hash(m), v);
        }

        private static int hash(MethodDeclaration m) {
            if (!m.containsData(HASH)) {
                m.setData(HASH, m.hashCode());
            }
            return m.getData(HASH);
        }
    }

    /** A frame: one method (or the entry's body) being walked. */
    private static final class Frame {
        final int depth;
        final List<Step> path;
        Integer tx;
        Location txLoc;
        final Visiting visiting;
        final TypeDeclaration<?> type;
        final MethodDeclaration method;
        boolean counter;
        String memberText;
        /** Set while walking work handed to another thread: where it was handed off. */
        Location async;
        /** The HTTP method a Camel route set before sending the exchange on to this route, which its headers carry. */
        String camelVerb;
        /** The branches taken by the calls that led into this frame (see {@link Event#arms}). */
        List<Long> arms = List.of();
        /** The calls that led into this frame, outermost first: where an acknowledging wrapper was called from. */
        List<Node> sites = List.of();
        /** The names in this frame that hold the message's data ({@link Dataflow}); null when that is not known. */
        Set<String> data;
        /**
         * Parameters of this frame's method bound to the class the caller passed ({@code handleEvent(e, loanHandler)}
         * into {@code KafkaEventHandler<T> handler}): a call on one runs that class's override, not every one's.
         */
        Map<String, String> bound = Map.of();

        Frame(
                int depth,
                List<Step> path,
                Integer tx,
                Location txLoc,
                Visiting visiting,
                TypeDeclaration<?> type,
                MethodDeclaration method) {
            this.depth = depth;
            this.path = path;
            this.tx = tx;
            this.txLoc = txLoc;
            this.visiting = visiting;
            this.type = type;
            this.method = method;
        }
    }

    /**
     * Callback interfaces a template runs synchronously, in the caller's thread, before the call returns:
     * Spring Data Redis, JDBC, Kafka, Rabbit and Mongo templates' callbacks (a transaction template's callback
     * is not among them: it opens a transaction this walk would not see).
     */
    private static final Set<String> SYNC_CALLBACKS = Set.of(
            "SessionCallback",
            "RedisCallback",
            "ConnectionCallback",
            "StatementCallback",
            "PreparedStatementCallback",
            "CallableStatementCallback",
            "ProducerCallback",
            "OperationsCallback",
            "ChannelCallback",
            "CollectionCallback",
            "DbCallback");

    /** Types the traced flow reads the message into (the handler's parameters, deserialization targets). */
    private Set<String> payloadTypes = new HashSet<>();

    private static final Pattern DESERIALIZE =
            Pattern.compile("readValue|fromJson|convertValue|treeToValue|parseObject");

    List<Event> trace(Entry e) {
        entry = e;
        events = new ArrayList<>();
        spans = new ArrayList<>();
        finallyAcks = new java.util.IdentityHashMap<>();
        effectNodes.clear();
        quiet.clear();
        span(e.body);
        seq = 0;
        Integer tx = null;
        Location txLoc = null;
        if (e.transactional) {
            tx = ++txIds;
            txLoc = e.location;
        }
        MethodDeclaration m = e.decl instanceof MethodDeclaration md
                ? md
                : Types.ancestor(e.body, MethodDeclaration.class).orElse(null);
        List<Step> path = List.of(new Step(e.name, e.location));
        payloadTypes = new HashSet<>();
        if (m != null) {
            m.getParameters().forEach(p -> payloadTypes.add(Types.simple(p.getType())));
        }
        Visiting visiting = Visiting.of(m);
        Frame top = new Frame(0, path, tx, txLoc, visiting, Types.enclosingType(e.body), m);
        top.data = messageNames(e, m);
        if (e.body instanceof MethodReferenceExpr r) {
            reference(r, top); // a bean returning service::apply: the handler is the method referred to
        } else {
            visit(e.body, top);
        }
        if (e.kind.equals("Kafka Connect SourceTask.poll")) {
            sourceTaskCommit(top);
        }
        if (m != null && e.ack == Entry.Ack.EXPLICIT) {
            returnedToCallers(m, top);
        }
        return events;
    }

    /** How many callers of a receiving helper are walked on from (each one a place its messages are worked on). */
    private static final int RETURNED_CALLERS = 4;

    /**
     * A helper that receives, acknowledges what it received (a delete, a commit) and returns the messages to its caller
     * (jenkinsci/aws-sqs-trigger-plugin's {@code getMessagesAndDelete}): the caller does the messages' work after the
     * helper has returned, so after the ack. The walk goes on in each caller (in the class, or in another class through
     * the helper's class or an interface it implements), over the statement that calls the helper and the statements
     * after it, with the name the messages are assigned to holding the message; the ack's ordering against what it
     * finds there is judged as for any ack.
     */
    private void returnedToCallers(MethodDeclaration m, Frame top) {
        if (m.getType().isVoidType()
                || m.getBody().isEmpty()
                || events.stream().noneMatch(x -> x.kind() == Event.Kind.ACK && x.handedOff() == null)
                || !returnsReceived(m, top.data)) {
            return;
        }
        TypeDeclaration<?> owner = Types.enclosingType(m);
        if (owner == null) {
            return;
        }
        Set<String> through = new HashSet<>();
        through.add(owner.getNameAsString());
        if (owner instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration cd) {
            cd.getImplementedTypes().forEach(t -> through.add(t.getNameAsString()));
            cd.getExtendedTypes().forEach(t -> through.add(t.getNameAsString()));
        }
        int walked = 0;
        for (Repo.Source s : repo.sources()) {
            for (MethodCallExpr c : s.cu().findAll(
                            MethodCallExpr.class,
                            c -> c.getNameAsString().equals(m.getNameAsString())
                                    && c.getArguments().size()
                                            == m.getParameters().size()
                                    && !m.isAncestorOf(c))) {
                boolean own =
                        c.getScope().isEmpty() || c.getScope().get() instanceof com.github.javaparser.ast.expr.ThisExpr;
                if (own
                        ? Types.enclosingType(c) != owner
                        : !through.contains(types.typeOf(c.getScope().get()))) {
                    continue;
                }
                if (walked++ >= RETURNED_CALLERS) {
                    return;
                }
                continueInCaller(c, top);
            }
        }
    }

    /** The helper returns what it received: a name holding the message, or the receive itself. */
    private static boolean returnsReceived(MethodDeclaration m, Set<String> data) {
        return m.getBody().get().findAll(ReturnStmt.class).stream()
                .filter(r -> Types.ancestor(r, LambdaExpr.class)
                        .filter(l -> m.isAncestorOf(l))
                        .isEmpty())
                .map(r -> r.getExpression().orElse(null))
                .anyMatch(x -> x instanceof NameExpr n && data != null && data.contains(n.getNameAsString())
                        || x != null && RECEIVE.matcher(x.toString()).matches());
    }

    /** Walks the statement of the caller that calls the helper and the statements after it in its block. */
    private void continueInCaller(MethodCallExpr c, Frame top) {
        Node stmt = c;
        while (stmt != null
                && !(stmt instanceof Statement && stmt.getParentNode().orElse(null) instanceof BlockStmt)) {
            if (stmt instanceof LambdaExpr || stmt instanceof MethodDeclaration) {
                return; // an expression lambda or a field initializer: no statements follow
            }
            stmt = stmt.getParentNode().orElse(null);
        }
        if (stmt == null) {
            return;
        }
        BlockStmt block = (BlockStmt) stmt.getParentNode().get();
        MethodDeclaration caller = Types.ancestor(c, MethodDeclaration.class).orElse(null);
        Node body = Types.ancestor(c, LambdaExpr.class)
                .filter(l -> caller == null || caller.isAncestorOf(l))
                .map(l -> (Node) l.getBody())
                .orElse(caller != null ? caller : block);
        Set<String> seeds = new HashSet<>();
        c.getParentNode()
                .filter(p -> p instanceof VariableDeclarator)
                .ifPresent(p -> seeds.add(((VariableDeclarator) p).getNameAsString()));
        c.getParentNode()
                .filter(p -> p instanceof AssignExpr a && a.getTarget() instanceof NameExpr)
                .ifPresent(p -> seeds.add(((AssignExpr) p).getTarget().toString()));
        TypeDeclaration<?> type = Types.enclosingType(c);
        List<Step> path = new ArrayList<>(top.path);
        path.add(new Step(
                (type == null ? "?" : type.getNameAsString()) + "." + (caller == null ? "?" : caller.getNameAsString()),
                repo.loc(c)));
        Frame f = new Frame(
                1,
                List.copyOf(path),
                top.tx,
                top.txLoc,
                caller == null ? top.visiting : Visiting.with(top.visiting, caller),
                type,
                caller);
        // seeded from what the call returns; with nothing assigned (the call an argument) every value may carry it
        f.data = seeds.isEmpty() ? null : dataflow.closure(body, seeds);
        span(stmt);
        boolean from = false;
        for (Statement next : block.getStatements()) {
            from |= next == stmt; // identity: an equal statement earlier in the block is another one
            if (from) {
                visit(next, f);
            }
        }
    }

    private final Dataflow dataflow = new Dataflow();
    private final Constants constants;

    /**
     * The names of the entry's method that hold the message: the handler's parameters (or its lambda's), and the
     * variables a receive call fills in a loop that pulls. Null when none is in sight: then every value counts.
     */
    private Set<String> messageNames(Entry e, MethodDeclaration m) {
        Set<String> seeds = new HashSet<>();
        if (e.body instanceof LambdaExpr l) {
            l.getParameters().forEach(p -> seeds.add(p.getNameAsString()));
        }
        Node scope = e.body instanceof LambdaExpr l ? l.getBody() : m != null ? m : e.body;
        if (m != null
                && (e.decl == m
                        || Types.ancestor(e.body, MethodDeclaration.class).orElse(null) == m)
                && !(e.body instanceof LambdaExpr)) {
            m.getParameters().forEach(p -> seeds.add(p.getNameAsString()));
        }
        for (VariableDeclarator d : scope.findAll(VariableDeclarator.class)) {
            if (d.getInitializer()
                    .filter(i -> RECEIVE.matcher(i.toString()).matches())
                    .isPresent()) {
                seeds.add(d.getNameAsString());
            }
        }
        return seeds.isEmpty() ? null : dataflow.closure(scope, seeds);
    }

    /**
     * The names of a callee ({@code callable}: a method or a lambda) that carry the message when {@code at} calls it
     * from frame {@code f}: the parameters whose arguments carry it, and what the body computes from them. A method
     * reference hands over whatever its caller iterates, so every parameter carries it.
     */
    private Set<String> carried(Node at, Node callable, Node body, Frame f) {
        List<com.github.javaparser.ast.body.Parameter> params = callable instanceof MethodDeclaration md
                ? md.getParameters()
                : callable instanceof LambdaExpr l ? l.getParameters() : List.of();
        if (f.data == null || !(at instanceof MethodCallExpr call)) {
            Set<String> all = new HashSet<>();
            params.forEach(p -> all.add(p.getNameAsString()));
            return f.data == null ? null : dataflow.closure(body, all);
        }
        Set<String> seeds = new HashSet<>();
        for (int i = 0; i < params.size() && i < call.getArguments().size(); i++) {
            boolean last = i == params.size() - 1 && params.get(i).isVarArgs();
            for (int j = i; j < (last ? call.getArguments().size() : i + 1); j++) {
                if (Dataflow.mentions(call.getArgument(j), f.data)) {
                    seeds.add(params.get(i).getNameAsString());
                }
            }
        }
        // a receiver built from the message (new Handler(event).run()) keeps it in fields, which are not followed:
        // every value of the callee may carry it
        if (call.getScope().map(x -> Dataflow.mentions(x, f.data)).orElse(false)) {
            return null;
        }
        return dataflow.closure(body, seeds);
    }

    private void visit(Node n, Frame f) {
        if (n instanceof com.github.javaparser.ast.stmt.CatchClause cc && entry.ack == Entry.Ack.AFTER_RETURN) {
            retryLeftToRedelivery(cc, f);
        }
        if (n instanceof ObjectCreationExpr oc && oc.getAnonymousClassBody().isPresent()) {
            if (SYNC_CALLBACKS.contains(oc.getType().getNameAsString())
                    && oc.getParentNode().orElse(null) instanceof MethodCallExpr) {
                // a callback the template runs there and then, in this thread: its body is part of the flow
                for (com.github.javaparser.ast.body.BodyDeclaration<?> b :
                        oc.getAnonymousClassBody().get()) {
                    if (b instanceof MethodDeclaration md && md.getBody().isPresent()) {
                        visit(md.getBody().get(), f);
                    }
                }
            }
            return; // any other anonymous class is a listener of its own, or runs elsewhere
        }
        if (n instanceof MethodCallExpr mc && isOnceBuilder(mc)) {
            add(Event.Kind.ONCE, mc, f, null, null, "IdempotentConsumer handler");
            return;
        }
        if (n instanceof LambdaExpr l && startsTransaction(l)) {
            Frame tf = new Frame(
                    f.depth, f.path, ++txIds, repo.loc(l.getParentNode().orElse(l)), f.visiting, f.type, f.method);
            tf.async = f.async;
            tf.arms = f.arms;
            tf.data = f.data;
            visitChildren(l, tf);
            return;
        }
        if (n instanceof TryStmt t && (swallowsFailures(t, f) || swallowsClientFailure(t, f))) {
            return;
        }
        if (n instanceof BlockStmt b && returnsEarlyShape(b, f)) {
            walkReturningEarly(b, f);
            return;
        }
        Expression started = n instanceof MethodCallExpr s ? threadTask(s) : null;
        if (started != null) {
            // a thread the handler starts and does not join runs its task after the handler returns, as a pool does
            MethodCallExpr h = (MethodCallExpr) n;
            add(Event.Kind.ASYNC, h, f, null, null, shortText(h));
            Location outer = f.async;
            f.async = repo.loc(h);
            runStarted(h, started, f);
            f.async = outer;
            return;
        }
        if (n instanceof MethodCallExpr h && handOff(h)) {
            add(Event.Kind.ASYNC, h, f, null, null, shortText(h));
            Location outer = f.async;
            f.async = repo.loc(h);
            visitChildren(n, f);
            f.async = outer;
            return;
        }
        if (n instanceof MethodCallExpr w && runsTaskHere(w)) {
            // a library's wrapper that runs the task it is given in this thread (a tenant scope, a lock): the task is
            // the work, walked in place; the wrapper call is not a write of its own
            visitChildren(n, f);
            return;
        }
        if (n instanceof MethodCallExpr d
                && DESERIALIZE.matcher(d.getNameAsString()).matches()) {
            d.getArguments().stream()
                    .filter(Expression::isClassExpr)
                    .forEach(x -> payloadTypes.add(Types.simple(x.asClassExpr().getType())));
        }
        if (n instanceof MethodCallExpr w && waits(w)) {
            add(Event.Kind.WAIT, w, f, null, null, shortText(w));
        }
        int before = events.size();
        visitChildren(n, f);
        if (n instanceof MethodCallExpr e
                && e.getNameAsString().matches("onErrorResume|onErrorResumeWith|onErrorContinue")
                && events.subList(before, events.size()).stream()
                        .anyMatch(x -> (x.kind() == Event.Kind.UNCONFIRMED
                                        || x.kind() == Event.Kind.EFFECT && x.category() == Event.Category.PUBLISH)
                                && e.getArguments().stream().anyMatch(a -> within(x, a)))) {
            // the failure handler publishes the message again (a retry exchange, a retry topic): a retry
            add(Event.Kind.RETRIES, e, f, null, null, shortText(e));
        }
        if (n instanceof MethodCallExpr c) {
            call(c, f);
            failureHandlerOnlyLogs(c, f, before);
        } else if (n instanceof AssignExpr a) {
            assign(a, f);
        } else if (n instanceof MethodReferenceExpr r
                && r.getParentNode().filter(p -> p instanceof MethodCallExpr).isPresent()) {
            reference(r, f);
        }
    }

    /**
     * Work the handler gives to another thread and does not run itself: {@code executor.submit(…)},
     * {@code CompletableFuture.runAsync(…)}, a reactive chain ended by {@code subscribe()}. A
     * reactive receiver's own pipeline is the entry point, not a hand-off.
     */
    private boolean handOff(MethodCallExpr c) {
        String n = c.getNameAsString();
        String scope = c.getScope().map(Repo::printed).orElse("");
        if ((n.equals("submit") || n.equals("execute"))
                && c.getArguments().size() == 1
                && (c.getArgument(0).isLambdaExpr() || c.getArgument(0).isMethodReferenceExpr())
                && scope.toLowerCase(Locale.ROOT).matches(".*(executor|pool|scheduler|service).*")) {
            return true;
        }
        if ((n.equals("runAsync") || n.equals("supplyAsync")) && scope.equals("CompletableFuture")) {
            return !waitedFor(c);
        }
        if (libraryAsync(c)) {
            return !waitedFor(c);
        }
        return n.equals("subscribe")
                && !entry.kind.startsWith("reactor")
                && c.getScope().filter(Expression::isMethodCallExpr).isPresent();
    }

    /**
     * The task a call starts on a thread of its own, or null: {@code new Thread(task).start()} (also with a thread
     * group or a name beside the task), a local {@code Thread t = new Thread(task)} started with {@code t.start()}
     * and not joined in the same body, a repository class extending {@code Thread} ({@code new Worker(r).start()}),
     * {@code Thread.startVirtualThread(task)} and {@code Thread.ofVirtual()…start(task)} /
     * {@code Thread.ofPlatform()…start(task)}.
     */
    private Expression threadTask(MethodCallExpr c) {
        String n = c.getNameAsString();
        Expression scope = c.getScope().orElse(null);
        if (n.equals("startVirtualThread")
                && scope instanceof NameExpr t
                && t.getNameAsString().equals("Thread")
                && c.getArguments().size() == 1) {
            return c.getArgument(0);
        }
        if (!n.equals("start")) {
            return null;
        }
        if (c.getArguments().size() == 1
                && scope instanceof MethodCallExpr b
                && Repo.printed(b).matches("(?s)(java\\.lang\\.)?Thread\\.of(Virtual|Platform)\\(\\).*")) {
            return c.getArgument(0);
        }
        if (!c.getArguments().isEmpty()) {
            return null;
        }
        ObjectCreationExpr made = scope instanceof ObjectCreationExpr oc ? oc : null;
        if (scope instanceof NameExpr v) {
            // the body the thread is started in: the method, constructor or lambda around the call
            Node body = c;
            while (body != null
                    && !(body instanceof MethodDeclaration
                            || body instanceof com.github.javaparser.ast.body.ConstructorDeclaration
                            || body instanceof LambdaExpr)) {
                body = body.getParentNode().orElse(null);
            }
            if (body == null) {
                return null;
            }
            String var = v.getNameAsString();
            boolean joined = body.findAll(MethodCallExpr.class).stream()
                    .anyMatch(j -> j.getNameAsString().equals("join")
                            && j.getScope()
                                    .filter(x -> x instanceof NameExpr nx
                                            && nx.getNameAsString().equals(var))
                                    .isPresent());
            if (joined) {
                return null;
            }
            made = body.findAll(com.github.javaparser.ast.body.VariableDeclarator.class).stream()
                    .filter(d -> d.getNameAsString().equals(var))
                    .map(d -> d.getInitializer().orElse(null))
                    .filter(i -> i instanceof ObjectCreationExpr)
                    .map(i -> (ObjectCreationExpr) i)
                    .findFirst()
                    .orElse(null);
        }
        if (made == null || made.getAnonymousClassBody().isPresent()) {
            return null;
        }
        String type = made.getType().getNameAsString();
        if (!type.equals("Thread")) {
            // a class of the repository extending Thread: its run() is the task
            boolean thread = repo.types(type).stream()
                    .anyMatch(t -> t instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration k
                            && k.getExtendedTypes().stream()
                                    .anyMatch(x -> x.getNameAsString().equals("Thread")));
            return thread ? made : null;
        }
        return made.getArguments().stream()
                .filter(a ->
                        a instanceof LambdaExpr || a instanceof MethodReferenceExpr || a instanceof ObjectCreationExpr)
                .findFirst()
                .orElse(null);
    }

    /** Walks the task a started thread runs: a lambda's body, an anonymous or a repository class's {@code run()}. */
    private void runStarted(MethodCallExpr at, Expression task, Frame f) {
        if (task instanceof LambdaExpr l) {
            visit(l.getBody(), f);
        } else if (task instanceof MethodReferenceExpr r) {
            if (r.getParentNode().filter(p -> p instanceof MethodCallExpr).isPresent()) {
                reference(r, f);
            }
        } else if (task instanceof ObjectCreationExpr oc
                && oc.getAnonymousClassBody().isPresent()) {
            for (com.github.javaparser.ast.body.BodyDeclaration<?> b :
                    oc.getAnonymousClassBody().get()) {
                if (b instanceof MethodDeclaration md
                        && md.getNameAsString().equals("run")
                        && md.getBody().isPresent()) {
                    visit(md.getBody().get(), f);
                }
            }
        } else if (task instanceof ObjectCreationExpr oc) {
            String type = oc.getType().getNameAsString();
            if (types.isRepoType(type)) {
                enter(at, camelTargets(type, "run"), false, f);
            }
        }
    }

    /** Catch types that take every failure of the work in their try block, transient ones included. */
    private static final Set<String> CATCH_ALL = Set.of("Exception", "Throwable", "RuntimeException");

    /**
     * How deep a catch-all may sit below the entry point and still decide the message's fate: the listener and the
     * helper it hands every message to. A catch-all further down guards one step (a best-effort notification), and
     * what the listener does after it is not seen here.
     */
    private static final int SWALLOW_DEPTH = 2;

    /**
     * A try block whose work fails into a catch of every exception that only logs (no rethrow, no nack, no
     * dead-letter, nothing handed on) in a listener its container acknowledges when it returns normally: a failed
     * message, transient failures included, is acknowledged and lost. Walks the try statement and records the loss
     * at the catch when the try block holds an effect the trace saw; false (nothing walked) when the shape does not
     * apply.
     */
    private boolean swallowsFailures(TryStmt t, Frame f) {
        if (!(entry.ack == Entry.Ack.AFTER_RETURN || seeksBackOnFailure())
                || f.async != null
                || f.depth > SWALLOW_DEPTH) {
            return false;
        }
        // a wait on a future in the try block fails with the future's own failure types: those catch the work's
        // failure as a catch-all does (FutureFailures)
        boolean waits = FutureFailures.waitsIn(t.getTryBlock());
        com.github.javaparser.ast.stmt.CatchClause swallow = t.getCatchClauses().stream()
                .filter(cc -> cc.getParameter().getType().toString().lines().count() == 1
                        && java.util.Arrays.stream(
                                        cc.getParameter().getType().toString().split("\\|"))
                                .map(x -> x.strip().replaceFirst("^java\\.lang\\.", ""))
                                .anyMatch(x -> CATCH_ALL.contains(x) || waits && FutureFailures.isFailureOfWait(x))
                        && (onlyLogs(cc.getBody()) || rejectsForGood(cc.getBody()) || retriesThenLogs(cc)))
                .findFirst()
                .orElse(null);
        if (swallow == null
                // a catch whose log line says the message will be retried is judged by retryLeftToRedelivery
                || swallow.getBody().findAll(StringLiteralExpr.class).stream()
                        .anyMatch(l -> RETRY_SAID.matcher(l.getValue()).find())
                || retryLoop(t)) {
            return false;
        }
        boolean retried = retriesThenLogs(swallow);
        boolean rejected = !retried && !onlyLogs(swallow.getBody());
        visitChildren(t, f);
        BlockStmt work = t.getTryBlock();
        List<Node> tasks = boundTasks(work, f);
        Event failed = events.stream()
                .filter(x -> (x.kind() == Event.Kind.EFFECT || x.kind() == Event.Kind.WORK)
                        && x.handedOff() == null
                        && x.blast() != Blast.CACHE
                        && (within(x, work) || tasks.stream().anyMatch(b -> within(x, b))))
                .findFirst()
                .orElse(null);
        if (failed != null) {
            add(
                    Event.Kind.REQUEUE_IGNORED,
                    swallow,
                    f,
                    null,
                    null,
                    (java.util.Arrays.stream(swallow.getParameter()
                                                    .getType()
                                                    .toString()
                                                    .split("\\|"))
                                            .map(x -> x.strip().replaceFirst("^java\\.lang\\.", ""))
                                            .anyMatch(CATCH_ALL::contains)
                                    ? "catches every exception (catch ("
                                            + swallow.getParameter().getType() + "))"
                                    : "catches a failure of the future it waits on (catch ("
                                            + swallow.getParameter().getType() + "))")
                            + " from the work that "
                            + failed.what()
                            + (rejected
                                    ? " and rejects the message without requeue (AmqpRejectAndDontRequeueException),"
                                            + " transient failures included, while no queue of the repository has a"
                                            + " dead-letter exchange: the broker drops it"
                                    : retried
                                            ? " and retries it in process, and once the retries are used up only logs"
                                                    + " it, and "
                                            : " and only logs it, and ")
                            + (rejected
                                    ? ""
                                    : seeksBackOnFailure()
                                            ? "the container seeks back only to a record whose listener threw, while"
                                                    + " enable.auto.commit=true commits the position past this one"
                                            : entry.ackText));
        }
        return true;
    }

    /**
     * {@code try { client.postInnReachApi(…); } catch (InnReachException e) { log.warn(…); }} (folio-org/mod-inn-reach's
     * notifier): a catch of the failure type the write's own client throws ({@link ClientFailures}) that only logs, in a
     * listener its container acknowledges on return, swallows the failure of the message's effect as a catch of every
     * exception does; a transient failure (the server down) is consumed. Unlike a catch-all it says which call it
     * guards, so it is judged at any depth the trace reaches, when the write it reports is in its try block. Walks the
     * try statement (true) when a catch of that shape is there; false otherwise.
     */
    private boolean swallowsClientFailure(TryStmt t, Frame f) {
        if (!(entry.ack == Entry.Ack.AFTER_RETURN || seeksBackOnFailure()) || f.async != null || retryLoop(t)) {
            return false;
        }
        List<com.github.javaparser.ast.stmt.CatchClause> candidates = t.getCatchClauses().stream()
                .filter(cc -> cc.getParameter().getType().toString().lines().count() == 1
                        && onlyLogs(cc.getBody())
                        && cc.getBody().findAll(StringLiteralExpr.class).stream()
                                .noneMatch(l -> RETRY_SAID.matcher(l.getValue()).find())
                        && java.util.Arrays.stream(
                                        cc.getParameter().getType().toString().split("\\|"))
                                .map(x -> x.strip().replaceAll(".*\\.", ""))
                                .noneMatch(CATCH_ALL::contains))
                .toList();
        if (candidates.isEmpty()) {
            return false;
        }
        visitChildren(t, f);
        BlockStmt work = t.getTryBlock();
        for (com.github.javaparser.ast.stmt.CatchClause cc : candidates) {
            List<String> caught = java.util.Arrays.stream(
                            cc.getParameter().getType().toString().split("\\|"))
                    .map(x -> x.strip().replaceAll(".*\\.", ""))
                    .toList();
            Event failed = events.stream()
                    .filter(x -> x.kind() == Event.Kind.EFFECT
                            && x.handedOff() == null
                            && x.blast() != Blast.CACHE
                            && within(x, work)
                            && caught.stream()
                                    .anyMatch(type -> ClientFailures.get().reports(type, x.category(), x.what())))
                    .findFirst()
                    .orElse(null);
            if (failed != null) {
                add(
                        Event.Kind.REQUEUE_IGNORED,
                        cc,
                        f,
                        null,
                        null,
                        "catches the failure of the write's own client (catch ("
                                + cc.getParameter().getType()
                                + ")) from the work that " + failed.what() + " and only logs it, and "
                                + (seeksBackOnFailure()
                                        ? "the container seeks back only to a record whose listener threw, while"
                                                + " enable.auto.commit=true commits the position past this one"
                                        : entry.ackText));
                break;
            }
        }
        return true;
    }

    /**
     * A block worth walking statement by statement for {@link #walkReturningEarly}: near the entry point, on the
     * listener's own thread, under a container that acknowledges on return or an ack the code makes after, with a try
     * statement that is not its last.
     */
    private boolean returnsEarlyShape(BlockStmt b, Frame f) {
        if (!(entry.ack == Entry.Ack.AFTER_RETURN || entry.ack == Entry.Ack.EXPLICIT || seeksBackOnFailure())
                || f.async != null
                || f.depth > SWALLOW_DEPTH) {
            return false;
        }
        NodeList<Statement> ss = b.getStatements();
        for (int i = 0; i < ss.size() - 1; i++) {
            if (ss.get(i) instanceof TryStmt) {
                return true;
            }
        }
        return false;
    }

    /**
     * {@code try { messages = build(event); } catch (Exception e) { log.error(…); return new Result(true); } send(messages);}
     * (telekom/pubsub-horizon-galaxy's task): a catch of every exception that only logs and then returns what the
     * method's normal path returns (nothing, or the same verdict a skip returns) leaves the method before the work after
     * the try statement, and says it went well: the message is acknowledged (on return, or by the ack the caller makes
     * on that verdict) and the work it skipped is never done. Walks the block's statements in order and records the
     * loss at the catch when a statement after the try holds an effect or work the trace saw.
     */
    private void walkReturningEarly(BlockStmt b, Frame f) {
        com.github.javaparser.ast.stmt.CatchClause early = null;
        int mark = -1;
        for (Statement s : b.getStatements()) {
            visit(s, f);
            if (early == null && s instanceof TryStmt t) {
                early = returnsEarly(t);
                mark = events.size();
            }
        }
        if (early == null || convertsOnly(((TryStmt) early.getParentNode().get()).getTryBlock())) {
            return;
        }
        Event skipped = events.subList(mark, events.size()).stream()
                .filter(x -> (x.kind() == Event.Kind.EFFECT || x.kind() == Event.Kind.WORK)
                        && x.handedOff() == null
                        && x.blast() != Blast.CACHE)
                .findFirst()
                .orElse(null);
        if (skipped != null) {
            add(
                    Event.Kind.RETURNED_EARLY,
                    early,
                    f,
                    null,
                    null,
                    "catches every exception (catch (" + early.getParameter().getType() + ")), only logs it and returns"
                            + " as the normal path does, before the work after the try statement that "
                            + skipped.what() + ": "
                            + (entry.ack == Entry.Ack.EXPLICIT
                                    ? "the message is acknowledged after it all the same"
                                    : seeksBackOnFailure()
                                            ? "the container seeks back only to a record whose listener threw, while"
                                                    + " enable.auto.commit=true commits the position past this one"
                                            : entry.ackText));
        }
    }

    /** Calls that only read or convert what they are given: a failure of one is the message's, not the moment's. */
    private static final Pattern CONVERTS = Pattern.compile(
            "parse\\w*|read\\w*|from\\w*|valueOf|decode\\w*|convert\\w*|deserialize\\w*|to[A-Z]\\w*|get\\w*|of|trim|split");

    /**
     * {@code try { json = new JSONObject(body); } catch (Exception e) { log…; return; }}: a try block that only parses or
     * converts the message (library constructors, parse and conversion calls) fails the same way on every delivery, so
     * returning early skips nothing a redelivery would do.
     */
    private boolean convertsOnly(BlockStmt b) {
        return b.findAll(MethodCallExpr.class).stream()
                        .allMatch(c -> CONVERTS.matcher(c.getNameAsString()).matches())
                && b.findAll(ObjectCreationExpr.class).stream()
                        .noneMatch(o -> types.isRepoType(o.getType().getNameAsString()));
    }

    /**
     * The catch of every exception of {@code t} that only logs and returns what the method returns on a normal path
     * (a bare return, or the very expression another return of the method outside a catch gives), or null.
     */
    private static com.github.javaparser.ast.stmt.CatchClause returnsEarly(TryStmt t) {
        if (retryLoop(t) || t.getFinallyBlock().isPresent()) {
            return null;
        }
        MethodDeclaration m = Types.ancestor(t, MethodDeclaration.class).orElse(null);
        if (m == null) {
            return null;
        }
        for (com.github.javaparser.ast.stmt.CatchClause cc : t.getCatchClauses()) {
            String type = cc.getParameter().getType().toString();
            NodeList<Statement> body = cc.getBody().getStatements();
            if (!java.util.Arrays.stream(type.split("\\|"))
                            .map(x -> x.strip().replaceFirst("^java\\.lang\\.", ""))
                            .anyMatch(CATCH_ALL::contains)
                    || body.isEmpty()
                    || !(body.get(body.size() - 1) instanceof ReturnStmt r)
                    || cc.getBody().findAll(StringLiteralExpr.class).stream()
                            .anyMatch(l -> RETRY_SAID.matcher(l.getValue()).find())) {
                continue;
            }
            BlockStmt logged = cc.getBody().clone();
            logged.getStatements().removeLast();
            if (!onlyLogs(logged)) {
                continue;
            }
            if (r.getExpression().isEmpty()) {
                return cc;
            }
            String verdict = r.getExpression().get().toString();
            boolean normal = m.findAll(ReturnStmt.class).stream()
                    .filter(o -> o != r
                            && Types.ancestor(o, com.github.javaparser.ast.stmt.CatchClause.class)
                                    .filter(m::isAncestorOf)
                                    .isEmpty()
                            && Types.ancestor(o, LambdaExpr.class)
                                    .filter(m::isAncestorOf)
                                    .isEmpty())
                    .anyMatch(o -> o.getExpression()
                            .map(x -> x.toString().equals(verdict))
                            .orElse(false));
            if (normal) {
                return cc;
            }
        }
        return null;
    }

    /**
     * {@code for (attempt = 1; attempt <= 3; attempt++) { try { book(s); return; } catch (RuntimeException e) { log… } }
     * throw …}: a try in a loop that its block leaves on success (a return or a break) is an attempt of an in-place
     * retry, and its catch goes round again rather than swallowing the failure.
     */
    private static boolean retryLoop(TryStmt t) {
        Node loop = null;
        for (Node p = t.getParentNode().orElse(null);
                p != null && !(p instanceof MethodDeclaration) && !(p instanceof LambdaExpr);
                p = p.getParentNode().orElse(null)) {
            if (p instanceof WhileStmt
                    || p instanceof com.github.javaparser.ast.stmt.ForStmt
                    || p instanceof com.github.javaparser.ast.stmt.DoStmt) {
                loop = p;
                break;
            }
        }
        return loop != null
                && (!t.getTryBlock().findAll(ReturnStmt.class).isEmpty()
                        || t.getTryBlock().findAll(com.github.javaparser.ast.stmt.BreakStmt.class).stream()
                                .anyMatch(b -> b.getLabel().isEmpty()));
    }

    /**
     * {@code catch (Exception e) { if (retry > max) log.error(…); else processWithRetry(message, retry + 1); }}: a
     * catch that calls its own method again under a condition is an in-process retry, and the arm that gives up only
     * logs, so the last failure is swallowed as by a catch that only logs. A catch that calls itself with no condition
     * retries for ever and loses nothing.
     */
    private static boolean retriesThenLogs(com.github.javaparser.ast.stmt.CatchClause cc) {
        String own = Types.ancestor(cc, MethodDeclaration.class)
                .map(MethodDeclaration::getNameAsString)
                .orElse(null);
        if (own == null) {
            return false;
        }
        List<MethodCallExpr> again = cc.getBody()
                .findAll(
                        MethodCallExpr.class,
                        c -> c.getNameAsString().equals(own)
                                && c.getScope()
                                        .filter(x -> !(x instanceof com.github.javaparser.ast.expr.ThisExpr))
                                        .isEmpty());
        if (again.isEmpty()
                || !again.stream()
                        .allMatch(c -> c.getParentNode().orElse(null) instanceof ExpressionStmt
                                && Types.ancestor(c, com.github.javaparser.ast.stmt.IfStmt.class)
                                        .filter(i -> cc.getBody().isAncestorOf(i))
                                        .isPresent())) {
            return false;
        }
        BlockStmt logged = cc.getBody().clone();
        logged.findAll(
                        MethodCallExpr.class,
                        c -> c.getNameAsString().equals(own)
                                && c.getParentNode().orElse(null) instanceof ExpressionStmt)
                .forEach(c -> c.getParentNode().ifPresent(Node::remove));
        return onlyLogs(logged);
    }

    /**
     * A Spring AMQP catch-all that logs and throws {@code AmqpRejectAndDontRequeueException}: the container rejects
     * the message without requeue, and a queue with no dead-letter exchange discards what it rejects, so every
     * failure (a database that is briefly down as well as a bad message) is lost as if it had been swallowed. With a
     * dead-letter exchange anywhere in the repository's code or configuration the rejected message is kept there,
     * and this is not a loss.
     */
    private boolean rejectsForGood(BlockStmt b) {
        if (!entry.kind.equals("@RabbitListener")) {
            return false;
        }
        List<com.github.javaparser.ast.stmt.ThrowStmt> throwsOf =
                b.findAll(com.github.javaparser.ast.stmt.ThrowStmt.class);
        if (throwsOf.isEmpty()
                || !throwsOf.stream()
                        .allMatch(x -> x.getExpression() instanceof ObjectCreationExpr o
                                && o.getType().getNameAsString().equals("AmqpRejectAndDontRequeueException"))) {
            return false;
        }
        BlockStmt logged = b.clone();
        logged.findAll(com.github.javaparser.ast.stmt.ThrowStmt.class).forEach(Node::remove);
        return onlyLogs(logged) && !repo.mentionsDeadLetter();
    }

    /**
     * Spring Kafka's container under {@code enable.auto.commit=true}: the consumer commits its position on a timer, but
     * when the listener throws, the container's error handler seeks back to the failed record and polls it again, so
     * a failure is still retried; only a listener that swallows it lets the position move past the record.
     */
    private boolean seeksBackOnFailure() {
        return entry.ack == Entry.Ack.AUTO && entry.kind.equals("@KafkaListener");
    }

    /**
     * {@code executeWithRetry(headers, () -> handler.handle(event), ex -> logFailedEvent(event, ex))}: work given to a
     * wrapper (a retry template, a tenant scope) beside a failure handler, a lambda taking the failure, that only logs
     * it (itself or through a method of the class that only logs). When the wrapper gives up it hands the failure to
     * that handler and returns normally, and in a listener its container acknowledges on return the failed message is
     * consumed: recorded at the handler when the call's work had an effect.
     */
    private void failureHandlerOnlyLogs(MethodCallExpr c, Frame f, int before) {
        if (entry.ack != Entry.Ack.AFTER_RETURN || f.async != null || f.depth > SWALLOW_DEPTH) {
            return;
        }
        LambdaExpr handler = c.getArguments().stream()
                .filter(a -> a instanceof LambdaExpr l && l.getParameters().size() == 1 && loggingOnly(l, f))
                .map(LambdaExpr.class::cast)
                .findFirst()
                .orElse(null);
        if (handler == null
                || c.getArguments().stream()
                        .noneMatch(a -> a != handler && (a.isLambdaExpr() || a.isMethodReferenceExpr()))) {
            return;
        }
        Event failed = events.subList(before, events.size()).stream()
                .filter(x -> x.kind() == Event.Kind.EFFECT && x.handedOff() == null && x.blast() != Blast.CACHE)
                .findFirst()
                .orElse(null);
        if (failed != null) {
            add(
                    Event.Kind.REQUEUE_IGNORED,
                    handler,
                    f,
                    null,
                    null,
                    "hands a failure of the work that " + failed.what() + " to a handler that only logs it (" + handler
                            + "), and " + entry.ackText);
        }
    }

    /**
     * {@code future = future.eventually(() -> step(tenant))} in a loop, in a file using Vert.x futures: eventually runs
     * its step when the chain completes either way and then completes as the chain did, ignoring the step's own
     * outcome, so the loop's chain ends with the first future's success whatever the steps did.
     */
    private static boolean eventuallyInLoop(MethodCallExpr c) {
        return c.getNameAsString().equals("eventually")
                && c.getArguments().size() == 1
                && c.getScope().orElse(null) instanceof NameExpr chain
                && c.getParentNode().orElse(null) instanceof AssignExpr assign
                && assign.getTarget() instanceof NameExpr target
                && target.getNameAsString().equals(chain.getNameAsString())
                && (Types.ancestor(c, com.github.javaparser.ast.stmt.ForEachStmt.class)
                                .isPresent()
                        || Types.ancestor(c, com.github.javaparser.ast.stmt.ForStmt.class)
                                .isPresent()
                        || Types.ancestor(c, com.github.javaparser.ast.stmt.WhileStmt.class)
                                .isPresent())
                && c.findCompilationUnit()
                        .map(cu -> cu.getImports().stream()
                                .anyMatch(i -> i.getNameAsString().startsWith("io.vertx.core")))
                        .orElse(false);
    }

    /** A lambda whose body only logs, or calls a method of the class whose body only logs. */
    private boolean loggingOnly(LambdaExpr l, Frame f) {
        BlockStmt body = l.getBody() instanceof BlockStmt b
                ? b
                : new BlockStmt(
                        new com.github.javaparser.ast.NodeList<>(l.getBody().clone()));
        if (onlyLogs(body) && !body.findAll(MethodCallExpr.class).isEmpty()) {
            return true;
        }
        if (body.getStatements().size() != 1
                || !(body.getStatement(0) instanceof ExpressionStmt es)
                || !(es.getExpression() instanceof MethodCallExpr own)
                || own.getScope()
                        .filter(x -> !(x instanceof com.github.javaparser.ast.expr.ThisExpr))
                        .isPresent()) {
            return false;
        }
        TypeDeclaration<?> t = Types.enclosingType(l);
        return t != null
                && t.getMethodsByName(own.getNameAsString()).stream()
                        .anyMatch(m -> m.getBody().map(Tracer::onlyLogs).orElse(false)
                                && !m.getBody()
                                        .get()
                                        .findAll(MethodCallExpr.class)
                                        .isEmpty());
    }

    /** A catch body that neither rethrows, hands the failure on, nor returns a verdict: logging and a bare return. */
    private static boolean onlyLogs(BlockStmt b) {
        return b.findAll(com.github.javaparser.ast.stmt.ThrowStmt.class).isEmpty()
                && b.findAll(ObjectCreationExpr.class).isEmpty()
                && b.findAll(AssignExpr.class).isEmpty()
                && b.findAll(ReturnStmt.class).stream()
                        .allMatch(r -> r.getExpression().isEmpty())
                && b.findAll(MethodCallExpr.class).stream()
                        .allMatch(c -> INERT.matcher(c.getNameAsString()).matches() || loggerLog(c) || inLogMessage(c));
    }

    /** {@code log.log(level, "…", ex)}: a logger given its level as an argument. */
    private static boolean loggerLog(MethodCallExpr c) {
        return c.getNameAsString().equals("log")
                && c.getScope()
                        .map(x -> x.toString().matches("(?i)\\w*log(ger)?"))
                        .orElse(false);
    }

    /** A logger's level names: a call with one of them formats a message and does nothing else. */
    private static final Pattern LOG_LEVEL = Pattern.compile("trace|debug|info|warn|error|log|println|printf");

    /**
     * {@code LOG.warn("…", LoggerUtils.removeLineBreaks(value), e)}: a static helper's call that only builds an
     * argument of a log call (a sanitiser, a formatter) is part of the message, not a step that handles the failure.
     */
    private static boolean inLogMessage(MethodCallExpr c) {
        boolean helper = c.getScope()
                .map(x -> x.toString().replaceAll(".*\\.", ""))
                .filter(x -> !x.isEmpty() && Character.isUpperCase(x.charAt(0)))
                .isPresent();
        for (Node p = c.getParentNode().orElse(null);
                p instanceof Expression;
                p = p.getParentNode().orElse(null)) {
            if (p instanceof MethodCallExpr m
                    && LOG_LEVEL.matcher(m.getNameAsString()).matches()
                    && m.getArguments().stream().anyMatch(a -> a == c || a.isAncestorOf(c))
                    // a call inside a logger's arguments (changes.size(), e.getMessage(), record.key()) computes
                    // what the line says, whatever it is called on: SLF4J, Log4j and java.util.logging take the
                    // values and format them, they hand nothing on
                    && (helper || LoggingCalls.logger(m))) {
                return true;
            }
        }
        return false;
    }

    /** A method whose name says it runs its work later, on another thread: an async wrapper, a submit, a schedule. */
    private static final Pattern ASYNC_NAME = Pattern.compile("\\w*(Async|async)\\w*|submit\\w*|schedule\\w*");

    /**
     * Work given as a task to a library's own asynchronous wrapper (folio-spring's {@code
     * executeAsyncSystemUserScoped(tenant, () -> …)}, a {@code TaskExecutor}'s {@code submitListenable}, a scheduler's
     * {@code schedule}): the name says the work runs later, the work goes in as a task that takes nothing (a lambda
     * without parameters; one with parameters is a completion callback, not the work), and the receiver is not the
     * repository's own (its method is followed instead, and meets the executor there).
     */
    private boolean libraryAsync(MethodCallExpr c) {
        return !c.getNameAsString().startsWith("commit") && libraryTask(c, ASYNC_NAME);
    }

    /** A name a wrapper that runs its task before it returns goes by: execute, run, call, with…, in…. */
    private static final Pattern WRAPPER_NAME = Pattern.compile("(execute|run|call|with|in)([A-Z]\\w*)?");

    /**
     * {@code contextService.execute(tenant, ctx, () -> handler.handle(event))}, {@code
     * scoped.executeSystemUserScoped(tenant, () -> …)}: a library's synchronous wrapper given a parameterless task
     * (not a hand-off: {@link #handOff} is asked first).
     */
    private boolean runsTaskHere(MethodCallExpr c) {
        return libraryTask(c, WRAPPER_NAME);
    }

    /** A call named as {@code name} says, on a type not in the repository, given a lambda without parameters. */
    private boolean libraryTask(MethodCallExpr c, Pattern name) {
        if (!name.matcher(c.getNameAsString()).matches()
                || c.getArguments().stream()
                        .noneMatch(a ->
                                a instanceof LambdaExpr l && l.getParameters().isEmpty())) {
            return false;
        }
        String stype = c.getScope().map(types::typeOf).orElse(null);
        return stype != null && !types.isRepoType(stype);
    }

    /** {@code CompletableFuture.runAsync(…).join()} or a returned stage: the handler does wait. */
    private static boolean waitedFor(MethodCallExpr c) {
        for (Node p = c.getParentNode().orElse(null);
                p instanceof MethodCallExpr m;
                p = p.getParentNode().orElse(null)) {
            if (m.getNameAsString().matches("join|get")) {
                return true;
            }
        }
        return Types.ancestor(c, com.github.javaparser.ast.stmt.ReturnStmt.class)
                .isPresent();
    }

    /**
     * The handler waits for work it handed off: {@code future.get()}, {@code join()}, {@code await()}.
     * A timed wait whose result is thrown away ({@code latch.await(30, SECONDS);} as a statement) is not
     * one: when it times out the handler goes on as if the work were done.
     */
    private static final Pattern WAIT_NAMES =
            Pattern.compile("get|join|await|awaitTermination|allOf|block|blockLast|blockFirst");

    private static boolean waits(MethodCallExpr c) {
        String n = c.getNameAsString();
        if (!WAIT_NAMES.matcher(n).matches()) {
            return false;
        }
        if (n.equals("get") && c.getArguments().size() == 1) {
            return false; // map.get(key), not a future
        }
        if (n.equals("allOf")
                && c.getParentNode().orElse(null) instanceof MethodCallExpr then
                && then.getScope().orElse(null) == c
                && then.getNameAsString().matches("get|join")) {
            return waits(then); // allOf(…).get(30, SECONDS) as a statement waits no longer than its timeout
        }
        boolean timed = !c.getArguments().isEmpty() && !n.equals("allOf");
        boolean ignored =
                c.getParentNode().filter(p -> p instanceof ExpressionStmt).isPresent();
        return !(timed && ignored);
    }

    private void visitChildren(Node n, Frame f) {
        List<Node> children = new ArrayList<>(n.getChildNodes());
        children.sort(Comparator.comparing(
                c -> c.getBegin().map(p -> p.line * 10_000L + p.column).orElse(0L)));
        for (Node c : children) {
            visit(c, f);
        }
    }

    private boolean isOnceBuilder(MethodCallExpr mc) {
        return mc.getNameAsString().equals("handler") && mc.toString().contains("IdempotentConsumer.builder()");
    }

    private boolean startsTransaction(LambdaExpr l) {
        Optional<Node> p = l.getParentNode();
        if (p.isEmpty() || !(p.get() instanceof MethodCallExpr mc)) {
            return false;
        }
        String n = mc.getNameAsString();
        String scope = mc.getScope().map(Object::toString).orElse("").toLowerCase(Locale.ROOT);
        return (n.equals("execute")
                        || n.equals("executeWithoutResult")
                        || n.equals("inTransaction")
                        || n.equals("transaction")
                        || n.equals("transactionResult"))
                && (scope.contains("transaction")
                        || scope.contains("tx")
                        || scope.contains("dsl")
                        || scope.contains("jdbi"));
    }

    // ---- calls ------------------------------------------------------------------------------------

    /**
     * A JDK {@code HttpRequest} whose verb is a value ({@code .method(method, BodyPublishers.ofString(body))}, the
     * verb read from the message or a configuration): a request with a body whose verb is not written out as a read
     * ({@code "GET"}, {@code "HEAD"}, {@code "DELETE"}, {@code "OPTIONS"}) and whose body is not {@code noBody()}.
     */
    private static final Pattern JDK_VERB_AS_VALUE = Pattern.compile(
            "\\.method\\(\\s*(?!\"(?i:GET|HEAD|DELETE|OPTIONS)\")[^,()]+(\\([^()]*\\))?\\s*,\\s*(?![\\w.]*noBody\\(\\))");

    /** The same, with the verb written out as {@code "PUT"}: a replace, kept as a write a crash can lose. */
    private static final Pattern JDK_PUT_AS_VALUE = Pattern.compile("\\.method\\(\\s*\"(?i:PUT)\"");

    private void call(MethodCallExpr c, Frame f) {
        String name = c.getNameAsString();
        Optional<Expression> scope = c.getScope();
        String stype = scope.map(x -> boundType(x, f)).orElse(null);
        String scopeText = scope.map(Repo::printed).orElse("");

        if (stype != null && ONCE_TYPES.contains(stype)) {
            add(Event.Kind.ONCE, c, f, null, null, stype + "." + name);
            return;
        }
        if (name.equals("claim") && "Inbox".equals(stype)) {
            add(Event.Kind.CLAIM, c, f, null, null, "Inbox.claim");
            return;
        }
        if (name.equals("add") && (scopeText.endsWith("outbox()") || "Outbox".equals(stype))
                || name.equals("publish") && stype != null && stype.equals("DomainEventPublisher")) {
            add(Event.Kind.OUTBOX, c, f, null, null, scopeText + "." + name);
            return;
        }
        if (ack(c, name, stype, scopeText, f)) {
            return;
        }
        if (buffers(c, stype, f)) {
            return;
        }
        partialFailuresIgnored(c, name, stype, f);
        if (name.equals("send") && "Sender".equals(stype) && imports(c, "reactor.rabbitmq")) {
            add(
                    Event.Kind.UNCONFIRMED,
                    c,
                    f,
                    null,
                    null,
                    "publishes with reactor-rabbitmq Sender.send (" + shortText(c) + "), which does not wait for a"
                            + " publisher confirm (sendWithPublishConfirms does)");
        }
        if (name.equals("timeout") && c.getScope().isPresent() && imports(c, "reactor.core.publisher")) {
            add(
                    Event.Kind.TIMEOUT,
                    c,
                    f,
                    null,
                    null,
                    "timeout(" + shortText0(c.getArguments().toString().replaceAll("^\\[|\\]$", "")) + ")");
        }
        if (name.matches("retry|retryWhen|retryBackoff") && imports(c, "reactor.core.publisher")) {
            add(Event.Kind.RETRIES, c, f, null, null, shortText(c));
        }
        if (c.getArguments().stream()
                .anyMatch(a -> a instanceof NameExpr n && tempFiles.contains(n.getNameAsString()))) {
            // the temp file the messages were written to is taken on (uploaded, stored): the buffer is drained here
            add(Event.Kind.WAIT, c, f, null, null, shortText(c));
        }
        if (eventuallyInLoop(c)) {
            add(
                    Event.Kind.REQUEUE_IGNORED,
                    c,
                    f,
                    null,
                    null,
                    "chains each step with Vert.x Future.eventually in a loop (" + shortText(c)
                            + "), which runs the next"
                            + " step whatever the last one did and ends as the chain's first future: a step that failed"
                            + " is dropped, the handler's future succeeds, and " + entry.ackText);
        }
        if (name.equals("setAutoCommit")
                && c.getArguments().size() == 1
                && c.getArgument(0).toString().equals("false")) {
            f.tx = ++txIds;
            f.txLoc = repo.loc(c);
            return;
        }
        if (name.equals("sleep") && scopeText.equals("Thread") || name.equals("sleep") && "TimeUnit".equals(stype)) {
            if (beforeReceive(c)) {
                return; // a pause between batches, before the next receive: no message is held while it sleeps
            }
            add(Event.Kind.SLOW, c, f, null, null, "Thread.sleep in the consumer");
            return;
        }
        if (name.equals("conditionExpression") && c.toString().contains("attribute_not_exists")) {
            add(Event.Kind.GUARD, c, f, null, null, "conditional write (attribute_not_exists)");
            return;
        }
        if (name.equals("idempotentConsumer")
                && "camel".equals(entry.broker)
                && !c.getArguments().isEmpty()) {
            add(
                    Event.Kind.WEAK,
                    c,
                    f,
                    null,
                    null,
                    c.toString().toLowerCase(Locale.ROOT).contains("memory")
                            ? "Camel idempotentConsumer with an in-memory repository: forgotten on restart, not shared between instances"
                            : "Camel idempotentConsumer: its repository commits apart from the route's effects");
            return;
        }
        if (camelDirect(c, name, stype, scopeText, f)) {
            return;
        }
        if (("camel".equals(entry.broker) || inRoute(c)) && camel(c, name, f)) {
            return;
        }
        lookupArm = null;
        if (isCheck(c, name)) {
            if (lookupArm != null) {
                // the lookup checks only what its empty arm does: an effect after the if runs found or not
                List<Long> arms = new ArrayList<>(arms(c, f));
                arms.add(lookupArm);
                Frame armed = new Frame(f.depth, f.path, f.tx, f.txLoc, f.visiting, f.type, f.method);
                armed.async = f.async;
                armed.arms = List.copyOf(arms);
                add(Event.Kind.LOOKUP, c, armed, null, null, c.toString());
                return;
            }
            add(Event.Kind.CHECK, c, f, null, null, c.toString());
            return;
        }
        // a mapper's default method calling its own annotated statement (JDBI: a @Transaction default method calling
        // the @SqlUpdate beside it) names no receiver: the mapper is the method's own type
        String mapperType = stype == null && scope.isEmpty() && f.type != null ? f.type.getNameAsString() : stype;
        String sql = sqlOf(c, mapperType, name);
        if (sql != null) {
            Optional<AnnotationExpr> declared =
                    mapperType == null ? Optional.empty() : schema.mapperAnnotation(mapperType, name);
            if (declared.isPresent()) {
                // the SQL is written on the mapper's method: the finding points there, the call is a step of its path
                List<Step> path = new ArrayList<>(f.path);
                path.add(new Step(mapperType + "." + name, repo.loc(c)));
                Frame mapper = new Frame(f.depth + 1, List.copyOf(path), f.tx, f.txLoc, f.visiting, f.type, f.method);
                mapper.async = f.async;
                mapper.arms = arms(c, f);
                sql(c, declared.get(), sql, mapper);
            } else {
                sql(c, c, sql, f);
            }
            return;
        }
        if (deferredToTimer(c, name, f)) {
            return;
        }
        if (library(c, name, stype, scopeText, f)) {
            return;
        }
        int eventsBefore = events.size();
        long effectsBefore =
                events.stream().filter(x -> x.kind() == Event.Kind.EFFECT).count();
        // a method of the repository that starts its work and returns the future of it, called as a statement: the
        // handler drops the future and returns before the work is done (mod-pubsub's deliverEvent under auto-commit)
        Location outer = f.async;
        if (f.async == null && droppedFuture(c, stype, scope, f)) {
            add(Event.Kind.ASYNC, c, f, null, null, shortText(c));
            f.async = repo.loc(c);
        }
        descend(c, name, stype, scope, f);
        f.async = outer;
        if (events.size() == eventsBefore) {
            libraryWork(c, name, stype, scope, f);
        }
        if (stype == null
                || !types.isRepoType(stype)
                || events.stream().filter(x -> x.kind() == Event.Kind.EFFECT).count() != effectsBefore) {
            return;
        }
        if (repo.methods(stype, name, c.getArguments().size(), c).stream()
                .noneMatch(m -> m.getBody().isPresent())) {
            // the repository's own interface with no implementation in sight (generated, or provided at
            // run time): judged by the catalogue on its name, as a library would be, then by its verb
            if (!catalogued(c, stype, f)) {
                collaboratorWrite(c, stype, f);
            }
        } else if (events.size() == eventsBefore
                && GATEWAY.matcher(stype).matches()
                && visible(repo.methods(stype, name, c.getArguments().size(), c)).stream()
                        .anyMatch(this::opaque)) {
            // the project's own store, client or queue whose code does nothing the trace recognises and hands the
            // work to a client it cannot read (its SQL, its SDK, its broker): what it is named for, and the verb,
            // say the write. One whose code is in sight and only logs or computes has no effect
            collaboratorWrite(c, stype, f);
        }
    }

    /**
     * {@code GitHubHooks.get().doIndex(event, body)}, {@code processor.process(release.name())}: the message's data
     * handed, under a work verb ({@link WorkVerbs}), to a type the repository does not hold, in the handler's own
     * thread. Recorded as {@link Event.Kind#WORK}: no duplicate is claimed for it (what the library writes is not in
     * sight), but an ack in a finally block around it, or a catch-all that only logs it, consumes a failed message.
     */
    private void libraryWork(MethodCallExpr c, String name, String stype, Optional<Expression> scope, Frame f) {
        if (scope.isEmpty() || f.async != null || !WorkVerbs.get().works(name)) {
            return;
        }
        String type = stype;
        if (type == null) {
            // a static entry of a library ({@code GitHubHooks.get().doIndex(…)}): the chain starts at a type name
            Expression root = scope.get();
            while (root instanceof MethodCallExpr m && m.getScope().isPresent()) {
                root = m.getScope().get();
            }
            if (!(root instanceof NameExpr n)
                    || !Character.isUpperCase(n.getNameAsString().charAt(0))) {
                return;
            }
            type = n.getNameAsString();
        }
        if (types.isRepoType(type)
                || IN_PROCESS.matcher(type).matches()
                || JUDGED_ELSEWHERE.matcher(type).matches()
                || FUNCTIONAL.matcher(type).matches()
                // with no names known to carry the message (a receive assigned to a variable declared before it), any
                // value handed over may, as for a collaborator's write
                || c.getArguments().stream()
                        .filter(a -> !a.isLambdaExpr() && !a.isMethodReferenceExpr())
                        .noneMatch(a -> f.data == null || Dataflow.mentions(a, f.data))) {
            return;
        }
        add(
                Event.Kind.WORK,
                c,
                f,
                Blast.DATA,
                null,
                "hands the message to " + type + "." + name + " (" + shortText(c) + ")");
    }

    /**
     * The JDK's functional interfaces: {@code converter.apply(event)} runs code of this process (a lambda or a method
     * reference given to the class), not a library's; the trace reads it where it was written or not at all.
     */
    private static final Pattern FUNCTIONAL = Pattern.compile(
            "(Bi|Int|Long|Double|To\\w*)?(Function|Consumer|Supplier|Predicate|Operator)|UnaryOperator|BinaryOperator"
                    + "|Runnable|Callable");

    /** A future a method started and hands back: eager, unlike a reactive publisher nothing runs until subscribed. */
    private static final Pattern FUTURE_TYPE =
            Pattern.compile("Future|CompletableFuture|CompletionStage|ListenableFuture");

    /**
     * A call, as a statement, to a method of the repository declared to return a future: the result is dropped, so
     * nothing waits for the work it started.
     */
    private boolean droppedFuture(MethodCallExpr c, String stype, Optional<Expression> scope, Frame f) {
        if (!(c.getParentNode().orElse(null) instanceof com.github.javaparser.ast.stmt.ExpressionStmt)) {
            return false;
        }
        boolean self = scope.isEmpty() || scope.get() instanceof ThisExpr;
        String type = self ? (f.type == null ? null : f.type.getNameAsString()) : stype;
        if (type == null || !types.isRepoType(type)) {
            return false;
        }
        List<MethodDeclaration> targets =
                repo.methods(type, c.getNameAsString(), c.getArguments().size(), c);
        return !targets.isEmpty()
                && targets.stream()
                        .allMatch(m -> m.getBody().isPresent()
                                && !returnsCompleted(m)
                                && m.getType().isClassOrInterfaceType()
                                && FUTURE_TYPE
                                        .matcher(m.getType()
                                                .asClassOrInterfaceType()
                                                .getNameAsString())
                                        .matches());
    }

    /** A future made already complete: the method did its work before it returned it. */
    private static final Pattern COMPLETED_FUTURE = Pattern.compile(
            "(?s)\\s*(\\w+\\.)?(completedFuture|completedStage|succeededFuture|succeeded|immediateFuture|failedFuture)\\(.*");

    /** Every return of the method hands back a future made complete (work done in this thread, the future a formality). */
    private static boolean returnsCompleted(MethodDeclaration m) {
        List<com.github.javaparser.ast.stmt.ReturnStmt> returns = m.findAll(
                com.github.javaparser.ast.stmt.ReturnStmt.class,
                r -> Types.ancestor(r, LambdaExpr.class).isEmpty());
        return !returns.isEmpty()
                && returns.stream()
                        .allMatch(r -> r.getExpression()
                                .map(x -> COMPLETED_FUTURE.matcher(x.toString()).matches())
                                .orElse(false));
    }

    /**
     * The method's body calls out of the process through something the trace cannot read: a collaborator (a field)
     * of a library type that is neither in-process (a collection, a logger) nor a client the rules know.
     */
    private boolean opaque(MethodDeclaration m) {
        return m.getBody().isPresent()
                && m.getBody()
                        .get()
                        .findFirst(MethodCallExpr.class, c -> {
                            String field = collaborator(c);
                            if (field == null) {
                                return false;
                            }
                            Type t = types.fieldType(Types.enclosingType(c), field, 0);
                            String type = t == null ? null : Types.simple(t);
                            return type != null
                                    && !types.isRepoType(type)
                                    && !IN_PROCESS.matcher(type).matches();
                        })
                        .isPresent();
    }

    /** What a project names the class it writes through: a store, a remote client, a channel. */
    private static final Pattern GATEWAY = Pattern.compile("\\w*(Repository|Repo|Dao|DAO|Store|Storage|Ledger"
            + "|Journal|Client|Gateway|Api|Adapter|Connector|Port|Proxy|Sdk|Publisher|Producer|Sender|Queue|Bus|Broker"
            + "|Dispatcher|Notifier|Emitter)");

    /** Camel producer endpoints whose every exchange makes a write, by URI scheme. */
    private static final Pattern CAMEL_WRITE = Pattern.compile(
            "^(sql|jdbc|jpa|mongodb|elasticsearch|cql|couchdb|http|https|rest|smtp|smtps|mail|sns|aws2-sns|aws2-ses|twilio|slack|file|ftp|sftp|aws2-s3|google-storage|azure-storage-blob|kafka|jms|activemq|rabbitmq|spring-rabbitmq|aws2-sqs|google-pubsub|nats):.*");

    /**
     * A step of a Camel route: {@code .bean(Service.class, "method")}, {@code .bean(service, "m")},
     * {@code .process(processor)} and {@code .to("bean:name?method=m")} run the repository's code (followed
     * like a call); {@code .to("sql:insert …")}, {@code .to("smtp:…")} and the like are effects of the
     * endpoint itself.
     */
    private boolean camel(MethodCallExpr c, String name, Frame f) {
        if (c.getArguments().isEmpty()) {
            return false;
        }
        Expression a0 = c.getArgument(0);
        String method =
                c.getArguments().size() >= 2 && c.getArgument(1) instanceof StringLiteralExpr m ? m.getValue() : null;
        if (name.equals("bean") || name.equals("process")) {
            String type = a0 instanceof ClassExpr ce
                    ? Types.simple(ce.getType())
                    : a0 instanceof ObjectCreationExpr oc ? oc.getType().getNameAsString() : types.typeOf(a0);
            if (type == null || !types.isRepoType(type)) {
                return name.equals("process") && a0 instanceof LambdaExpr ? false : type != null;
            }
            enter(c, camelTargets(type, name.equals("process") ? "process" : method), false, f);
            return true;
        }
        if (!(name.equals("to") || name.equals("toD") || name.equals("toF") || name.equals("wireTap"))) {
            return false;
        }
        if (!(a0 instanceof StringLiteralExpr lit)) {
            return camelHttpWrite(c, f);
        }
        String uri = lit.getValue();
        if (uri.startsWith("bean:")) {
            String[] parts = uri.substring(5).split("\\?");
            String bean = parts[0];
            String m = parts.length > 1 && parts[1].startsWith("method=")
                    ? parts[1].substring(7).split("&")[0]
                    : null;
            String type = Character.toUpperCase(bean.charAt(0)) + bean.substring(1);
            enter(c, camelTargets(type, m), false, f);
            return true;
        }
        if (!CAMEL_WRITE.matcher(uri).matches()) {
            return false;
        }
        String scheme = uri.substring(0, uri.indexOf(':'));
        if (scheme.equals("sql") || scheme.equals("jdbc")) {
            sql(c, c, uri.substring(4), f);
            return true;
        }
        boolean publish = scheme.matches("kafka|jms|activemq|rabbitmq|spring-rabbitmq|aws2-sqs|google-pubsub|nats");
        boolean notify = scheme.matches("smtp|smtps|mail|sns|aws2-sns|aws2-ses|twilio|slack");
        // an entity persisted through JPA is a write to the application's own database (in a JTA route, its XA one)
        boolean database = scheme.matches("jpa|hibernate|mybatis|mybatis-bean");
        // a JMS send from a route the JTA transaction runs goes through an XA connection factory: rolled back with
        // the receive, so a redelivery follows no sent copy
        boolean xa = entry.jtaTransaction != null && scheme.matches("jms|activemq|activemq6|sjms2?|amqp");
        effect(
                c,
                f,
                notify ? Blast.NOTIFICATION : publish ? Blast.MESSAGE : Blast.DATA,
                publish ? Event.Category.PUBLISH : database ? Event.Category.DATABASE : Event.Category.EXTERNAL,
                (publish ? "publishes to " : notify ? "sends a notification through " : "writes to ")
                        + "the Camel endpoint " + scheme + ":" + (xa ? " in the route's JTA transaction" : ""),
                xa || inRoute(c) && camelRequestKeyed(chainTop(c), f));
        return true;
    }

    /** Camel endpoints that run another route of the application in the caller's thread, before the call returns. */
    private static final Pattern CAMEL_DIRECT = Pattern.compile("(direct|direct-vm):([^?]+)(\\?.*)?");

    /** The routes walked at the moment: a route sending to itself, or two routes to each other, are walked once. */
    private final Set<Node> routesWalked = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());

    /** The routes of the repository that start {@code from("direct:name")}, by endpoint. */
    private final Map<String, List<Expression>> directRoutes = new HashMap<>();

    /**
     * A message sent to a {@code direct:} endpoint, by a {@code ProducerTemplate} ({@code send}, {@code sendBody},
     * {@code request…}) or by a route step ({@code .to("direct:…")}, {@code .enrich}), runs the route consuming it, in
     * this thread, before the call returns: the route is walked as a call, so what it writes (an HTTP POST, a
     * {@code .to("sql:…")}, a bean) is on this path.
     */
    private boolean camelDirect(MethodCallExpr c, String name, String stype, String scopeText, Frame f) {
        if (c.getArguments().isEmpty() || f.depth >= MAX_DEPTH) {
            return false;
        }
        boolean template = name.matches("(async)?(send|request)\\w*")
                && (stype != null
                        ? stype.matches("(Fluent)?ProducerTemplate")
                        : scopeText.toLowerCase(Locale.ROOT).contains("producertemplate"));
        boolean step = name.matches("to|toD|enrich|wireTap") && inRoute(c);
        if (!template && !step) {
            return false;
        }
        // .to("seda:a", "seda:b") sends to each endpoint it names (a multicast's recipients)
        List<Expression> uris = step && name.equals("to") ? c.getArguments() : List.of(c.getArgument(0));
        boolean any = false;
        for (Expression arg : uris) {
            String uri = constants.text(arg, c);
            java.util.regex.Matcher m = uri == null ? null : CAMEL_DIRECT.matcher(uri.trim());
            java.util.regex.Matcher q = uri == null ? null : CAMEL_QUEUED.matcher(uri.trim());
            if (m != null && m.matches()) {
                walkRoutes(c, "direct:" + m.group(2), false, f);
                any = true;
            } else if (q != null && q.matches()) {
                // a seda: endpoint told to wait for its route (waitForTaskToComplete=Always) runs it before returning
                boolean waits = q.group(3) != null && q.group(3).matches("(?i).*waitForTaskToComplete=Always.*");
                walkRoutes(c, q.group(1) + ":" + q.group(2), !waits, f);
                any = true;
            }
        }
        return any;
    }

    /**
     * In-memory queues of Camel ({@code seda:}, {@code vm:}, {@code disruptor:}): the sending route puts the exchange
     * on the queue and goes on, and the route consuming it runs later on that endpoint's own threads. A broker route
     * that hands its exchange to one returns, and its message is acknowledged, before that route's work runs: walked
     * as work handed off, as an executor's {@code submit} is.
     */
    private static final Pattern CAMEL_QUEUED = Pattern.compile("(seda|vm|disruptor|disruptor-vm):([^?]+)(\\?.*)?");

    /** Walks the routes consuming {@code endpoint} ({@code direct:name}, {@code seda:name}) from the step {@code c}. */
    private void walkRoutes(MethodCallExpr c, String endpoint, boolean handedOff, Frame f) {
        List<Expression> routes = directRoutes.computeIfAbsent(endpoint, this::routesFrom);
        if (handedOff && !routes.isEmpty()) {
            add(Event.Kind.ASYNC, c, f, null, null, shortText(c));
        }
        // the HTTP method the sending route set travels in the exchange's headers to the route it sends to
        String verb = camelVerb(c);
        for (Expression route : routes) {
            if (!routesWalked.add(route)) {
                continue;
            }
            List<Step> path = new ArrayList<>(f.path);
            path.add(new Step("route " + endpoint, repo.loc(c)));
            span(route);
            Frame r = new Frame(
                    f.depth + 1,
                    List.copyOf(path),
                    f.tx,
                    f.txLoc,
                    f.visiting,
                    Types.enclosingType(route),
                    Types.ancestor(route, MethodDeclaration.class).orElse(null));
            r.async = handedOff ? repo.loc(c) : f.async;
            r.camelVerb = verb != null ? verb : f.camelVerb;
            r.arms = arms(c, f);
            r.sites = append(f.sites, c);
            r.data = null; // the exchange carries the message in headers and properties the walk does not follow
            visit(route, r);
            routesWalked.remove(route);
        }
    }

    /** The HTTP method header a route sets before the step {@code c}, upper case; null when it sets none. */
    private static String camelVerb(MethodCallExpr c) {
        for (Expression x = c.getScope().orElse(null);
                x instanceof MethodCallExpr step;
                x = step.getScope().orElse(null)) {
            if (step.getNameAsString().equals("setHeader")
                    && step.getArguments().size() == 2
                    && step.getArgument(0).toString().matches("(Exchange\\.)?HTTP_METHOD|\"CamelHttpMethod\"")) {
                java.util.regex.Matcher m = Pattern.compile("\"(\\w+)\"")
                        .matcher(step.getArgument(1).toString());
                return m.find() ? m.group(1).toUpperCase(Locale.ROOT) : "";
            }
        }
        return null;
    }

    /**
     * The whole chain of each route that starts from {@code endpoint}: {@code direct:name} (read from
     * {@code direct:} or {@code direct-vm:}), or an in-memory queue's {@code seda:name}.
     */
    private List<Expression> routesFrom(String endpoint) {
        String scheme = endpoint.substring(0, endpoint.indexOf(':'));
        String name = endpoint.substring(endpoint.indexOf(':') + 1);
        repo.parseHolding(List.of(name));
        List<Expression> out = new ArrayList<>();
        for (Repo.Source s : repo.sources()) {
            if (!s.text().contains(name)) {
                continue;
            }
            for (MethodCallExpr from : s.cu().findAll(
                            MethodCallExpr.class,
                            x -> x.getNameAsString().equals("from")
                                    && x.getArguments().size() == 1)) {
                String uri = constants.text(from.getArgument(0), from);
                java.util.regex.Matcher m = uri == null
                        ? null
                        : (scheme.equals("direct") ? CAMEL_DIRECT : CAMEL_QUEUED).matcher(uri.trim());
                if (m != null
                        && m.matches()
                        && m.group(2).equals(name)
                        && (scheme.equals("direct") || m.group(1).equals(scheme))) {
                    out.add(chainTop(from));
                }
            }
        }
        return out;
    }

    /** The last call of the chain {@code call} starts: {@code from(…).process(…).to(…)} for {@code from(…)}. */
    private static Expression chainTop(MethodCallExpr call) {
        MethodCallExpr top = call;
        while (top.getParentNode().orElse(null) instanceof MethodCallExpr p
                && p.getScope().orElse(null) == top) {
            top = p;
        }
        return top;
    }

    /** Whether the call is a step of a Camel route: written in a {@code RouteBuilder}'s class. */
    private static boolean inRoute(Node c) {
        for (Node n = c; n != null; n = n.getParentNode().orElse(null)) {
            if (n instanceof ObjectCreationExpr oc
                    && oc.getType().getNameAsString().endsWith("RouteBuilder")) {
                return true;
            }
            if (n instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration t) {
                return t.getExtendedTypes().stream()
                        .anyMatch(x -> x.getNameAsString().endsWith("RouteBuilder"));
            }
        }
        return false;
    }

    /** A route's endpoint or address named for a read: a status query, a search, a price quote, a token. */
    private static final Pattern READ_ROUTE = Pattern.compile(
            "(?i).*(status|query|search|inquiry|enquiry|lookup|balance|quot|token|verif|validat|\\bget-|\\bfetch).*");

    /** A route's endpoint or address named for a write verb, which a read word beside it does not make a read. */
    private static final Pattern WRITE_ROUTE =
            Pattern.compile("(?i).*(create|update|send|notify|charge|refund|submit|initiat|cancel|register).*");

    /**
     * {@code .to(host + path)} / {@code .toD(…)} to an address the code builds, after the route set the HTTP method
     * header to POST, PUT or PATCH ({@code .setHeader(Exchange.HTTP_METHOD, constant("POST"))}): an HTTP write
     * through Camel's http component. A route whose endpoint and address are named for a read (a status query) and
     * not for a write is a read sent as a POST.
     */
    private boolean camelHttpWrite(MethodCallExpr c, Frame f) {
        String verb = null;
        String endpoint = "";
        for (Expression x = c.getScope().orElse(null);
                x instanceof MethodCallExpr step;
                x = step.getScope().orElse(null)) {
            String n = step.getNameAsString();
            if (verb == null
                    && n.equals("setHeader")
                    && step.getArguments().size() == 2
                    && step.getArgument(0).toString().matches("(Exchange\\.)?HTTP_METHOD|\"CamelHttpMethod\"")) {
                java.util.regex.Matcher m = Pattern.compile("\"(\\w+)\"")
                        .matcher(step.getArgument(1).toString());
                verb = m.find() ? m.group(1).toUpperCase(Locale.ROOT) : "";
            }
            if (n.equals("from") && step.getArguments().size() == 1) {
                endpoint = step.getArgument(0).toString();
            }
        }
        if (verb == null) {
            verb = f.camelVerb; // set by the route that sent the exchange here
        }
        if (verb == null || !verb.matches("POST|PUT|PATCH")) {
            return false;
        }
        String named = endpoint + " " + c.getArgument(0);
        if (READ_ROUTE.matcher(named).matches() && !WRITE_ROUTE.matcher(named).matches()) {
            add(Event.Kind.REMOTE, c, f, null, null, "Camel HTTP " + verb + " " + shortText(c));
            return true;
        }
        add(Event.Kind.REMOTE, c, f, null, null, "Camel HTTP " + verb + " " + shortText(c));
        effect(
                c,
                f,
                Blast.DATA,
                Event.Category.EXTERNAL,
                "calls Camel HTTP " + verb + " (" + shortText(c) + ")",
                // a PUT replaces what its address names, as for the other HTTP clients: a write a crash can lose, not
                // one a repeat duplicates
                verb.equals("PUT")
                        || keyed(chainTop(c).toString(), "")
                        || camelRequestKeyed(chainTop(c), f)
                        || ADDRESSED_BY_ID.matcher(c.getArgument(0).toString()).find());
        return true;
    }

    /**
     * An address whose last segment is the resource's own id from the exchange ({@code "node/${exchangeProperty.uuid}"}):
     * a write to the resource that id names, which a repeat writes again in place, not a POST to a collection that
     * makes another ({@code "node/${…uuid}/version"} is one).
     */
    private static final Pattern ADDRESSED_BY_ID = Pattern.compile("/\\$\\{[\\w.]*?(?i:id|uuid|key)\\}\"");

    /** A header a provider recognises a repeated request by: an idempotency key, a request or correlation id. */
    private static final Pattern KEY_HEADER =
            Pattern.compile("(?i)\"(x-)?(idempotency[-_]?key|request[-_]?id|correlation[-_]?id)\"");

    /** A route reading an exchange property ({@code ${exchangeProperty.correlationId}}). */
    private static final Pattern EXCHANGE_PROPERTY = Pattern.compile("\\$\\{exchangeProperty\\.(\\w+)}");

    /** A request body's own id, set by the client: the receiver dedupes by it (Mojaloop's transactionRequestId). */
    private static final Pattern REQUEST_ID_SETTER = Pattern.compile("set\\w*(RequestId|IdempotencyKey)");

    /**
     * The route's request carries an id the provider dedupes by and that stays the same when the work runs again: a
     * key header set from an exchange property the caller filled with something other than a fresh UUID or the clock
     * (the process's transaction id; followed to the caller's {@code exchange.setProperty(…)}), or a request id set
     * on the body from a value that is not fresh. A key drawn fresh on each run (the caller's
     * {@code setProperty(CORRELATION_ID, UUID.randomUUID())}) makes every repeat a new request.
     */
    private boolean camelRequestKeyed(Expression chain, Frame f) {
        for (MethodCallExpr step : chain.findAll(MethodCallExpr.class)) {
            if (REQUEST_ID_SETTER.matcher(step.getNameAsString()).matches()
                    && step.getArguments().size() == 1
                    && !FRESH.matcher(step.getArgument(0).toString()).matches()) {
                return true;
            }
            if (!step.getNameAsString().equals("setHeader")
                    || step.getArguments().size() != 2
                    || !KEY_HEADER.matcher(step.getArgument(0).toString()).matches()) {
                continue;
            }
            Expression value = step.getArgument(1);
            String text = value instanceof MethodCallExpr v && v.getArguments().size() == 1
                    ? constants.text(v.getArgument(0), v)
                    : null;
            text = text == null ? value.toString() : text;
            if (FRESH.matcher(text).matches()) {
                return false;
            }
            java.util.regex.Matcher property = EXCHANGE_PROPERTY.matcher(text);
            if (!property.find()) {
                // an idempotency key or request id copied from a constant or the message is the same on every run; a
                // correlation id copied along is as often a tracing header, so it counts only when the sender chose it
                return !step.getArgument(0).toString().toLowerCase(Locale.ROOT).contains("correlation");
            }
            Boolean fresh = propertyFresh(property.group(1), f);
            return fresh != null && !fresh;
        }
        return false;
    }

    /**
     * Whether the caller that sent the exchange into this route (innermost first) fills {@code property} with a fresh
     * value; null when no caller on the path sets it.
     */
    private Boolean propertyFresh(String property, Frame f) {
        for (int i = f.sites.size() - 1; i >= 0; i--) {
            Node site = f.sites.get(i);
            // the worker's lambda, else the route a `.to("direct:…")` step is part of (not its neighbours in
            // configure()), else the method
            Node body = Types.ancestor(site, LambdaExpr.class)
                    .map(Node.class::cast)
                    .or(() -> inRoute(site)
                            ? Types.ancestor(site, com.github.javaparser.ast.stmt.ExpressionStmt.class)
                                    .map(Node.class::cast)
                            : Optional.empty())
                    .or(() -> Types.ancestor(site, MethodDeclaration.class).map(Node.class::cast))
                    .orElse(null);
            if (body == null) {
                continue;
            }
            for (MethodCallExpr set : body.findAll(
                    MethodCallExpr.class,
                    x -> x.getNameAsString().equals("setProperty")
                            && x.getArguments().size() == 2)) {
                if (property.equals(constants.text(set.getArgument(0), set))) {
                    return FRESH.matcher(set.getArgument(1).toString()).matches();
                }
            }
        }
        return null;
    }

    /** The methods a Camel step names on a repository class: the one named, else its public methods. */
    private List<MethodDeclaration> camelTargets(String type, String method) {
        List<MethodDeclaration> out = new ArrayList<>();
        for (TypeDeclaration<?> t : repo.types(type)) {
            if (method != null) {
                out.addAll(t.getMethodsByName(method));
            } else {
                t.getMethods().stream().filter(MethodDeclaration::isPublic).forEach(out::add);
            }
        }
        return out;
    }

    private boolean ack(MethodCallExpr c, String name, String stype, String scopeText, Frame f) {
        // the calls the entry's catalogue line names acknowledge it whatever their receiver (an Azure queue's
        // deleteMessage is not SQS's)
        boolean ack = entry.ackCalls.contains(name)
                || switch (name) {
                    case "commitSync", "commitAsync" ->
                        stype == null || KAFKA_CONSUMERS.contains(stype) || SHARE_CONSUMERS.contains(stype);
                    case "deleteMessage", "deleteMessageBatch" ->
                        stype == null
                                || SQS.contains(stype)
                                || scopeText.toLowerCase(Locale.ROOT).contains("sqs");
                    case "basicAck" -> true;
                    case "newCompleteCommand" -> "zeebe".equals(entry.broker);
                    case "checkpoint" -> "kinesis".equals(entry.broker);
                    case "acknowledge" ->
                        stype == null
                                || stype.startsWith("Acknowledg")
                                || SHARE_CONSUMERS.contains(stype)
                                // jakarta.jms.Message and the providers' own (ActiveMQMessage, SQSTextMessage)
                                || stype.endsWith("Message") && !types.isRepoType(stype);
                    case "ack", "ackSync" ->
                        "nats".equals(entry.broker)
                                || "AcknowledgableDelivery".equals(stype)
                                || "pubsub".equals(entry.broker)
                                || "Message".equals(stype)
                                || (stype != null && stype.startsWith("AckReplyConsumer"));
                    default -> entry.ackCalls.contains(name);
                };
        if (ack) {
            Optional<FinallyAck> fin = finallyTry(c, f);
            // an ack a wrapper makes is placed at the wrapper's call in the handler's finally block, where a reader
            // sees it
            add(Event.Kind.ACK, fin.map(FinallyAck::at).orElse(c), f, null, null, c.toString());
            Event a = events.get(events.size() - 1);
            if (entry.ack == Entry.Ack.AFTER_RETURN) {
                silentArm(c)
                        .ifPresent(arm -> add(
                                Event.Kind.REQUEUE_IGNORED,
                                arm,
                                f,
                                null,
                                null,
                                "acknowledges by hand (" + c
                                        + ") on one arm and leaves the message unacknowledged on this"
                                        + " one to have it redelivered, but " + entry.ackText));
            }
            fin.map(FinallyAck::tryBlock).ifPresent(t -> {
                List<Event> inTry = events.stream()
                        .filter(x -> (x.kind() == Event.Kind.EFFECT || x.kind() == Event.Kind.WORK) && within(x, t))
                        .toList();
                if (!inTry.isEmpty()) {
                    finallyAcks.put(a, inTry);
                }
            });
            return true;
        }
        if (name.equals("sendOffsetsToTransaction")) {
            add(Event.Kind.EOS, c, f, null, null, "offsets committed in the producer transaction");
            return true;
        }
        return false;
    }

    /** What a log line says when it expects the message back: a retry, a requeue, a redelivery. */
    private static final Pattern RETRY_SAID = Pattern.compile("(?i)(will\\s+(be\\s+)?retr|to\\s+be\\s+retried"
            + "|retry\\s+later|retried\\s+later|requeu|re-queu|redeliver|(return\\w*|put|left|leav\\w*|back)\\s+(it\\s+)?"
            + "(on|to|in)\\s+(the\\s+)?queue|try\\s+again|will\\s+be\\s+reprocessed)");

    /**
     * A catch block in a consumer its container acknowledges on return that only logs, saying the message will be
     * retried ("will retry", "returning to queue"), and neither throws nor rejects: the handler returns normally, the
     * container acknowledges, and the failed message is never delivered again. A catch inside a loop retrying in
     * place, or in a method that a retry advice wraps, is a retry indeed.
     */
    private void retryLeftToRedelivery(com.github.javaparser.ast.stmt.CatchClause cc, Frame f) {
        // every statement a call that decides nothing (a log line, whatever it prints), and at least one
        NodeList<Statement> body = cc.getBody().getStatements();
        boolean onlyLogs = body.isNonEmpty()
                && body.stream()
                        .allMatch(st -> st instanceof ExpressionStmt es
                                && es.getExpression() instanceof MethodCallExpr call
                                && INERT.matcher(call.getNameAsString()).matches());
        if (!onlyLogs
                || cc.getBody().findAll(StringLiteralExpr.class).stream()
                        .noneMatch(l -> RETRY_SAID.matcher(l.getValue()).find())) {
            return;
        }
        Statement silent = body.get(0);
        for (Node p = cc.getParentNode().orElse(null);
                p != null && !(p instanceof MethodDeclaration);
                p = p.getParentNode().orElse(null)) {
            if (p instanceof LambdaExpr && p != entry.body) {
                return; // work handed to a callback or a scheduler: its failure is not the handler's
            }
            if (p instanceof WhileStmt
                    || p instanceof com.github.javaparser.ast.stmt.ForStmt
                    || p instanceof com.github.javaparser.ast.stmt.DoStmt
                    || p instanceof com.github.javaparser.ast.stmt.ForEachStmt) {
                return;
            }
        }
        MethodDeclaration m = Types.ancestor(cc, MethodDeclaration.class).orElse(null);
        if (m != null && Types.annotated(m.getAnnotations(), "Retryable", "Retry")) {
            return;
        }
        add(
                Event.Kind.REQUEUE_IGNORED,
                silent,
                f,
                null,
                null,
                "the catch block only logs that the message will be retried (" + shortText(silent)
                        + ") and returns normally, but " + entry.ackText);
    }

    /** Calls that decide nothing: logging, reading a property, parsing what was read. */
    private static final Pattern INERT = Pattern.compile(
            "trace|debug|info|warn|error|println|printf|format|get\\w*|is[A-Z]\\w*|parse\\w*|valueOf|toString|equals");

    /**
     * An arm beside the one that acknowledges by hand ({@code case SUCCESS -> message.acknowledge()}) that neither
     * acknowledges, rejects nor throws: only logs ("leaving it on the queue"). Where the container acknowledges when
     * the listener returns, that arm's message is acknowledged all the same. Its first statement, or none.
     */
    private static Optional<Statement> silentArm(MethodCallExpr ack) {
        Node child = ack;
        for (Node p = ack.getParentNode().orElse(null);
                p != null && !(p instanceof MethodDeclaration) && !(p instanceof LambdaExpr);
                p = p.getParentNode().orElse(null)) {
            List<Node> siblings = new ArrayList<>();
            Node sw = p.getParentNode().orElse(null);
            if (p instanceof com.github.javaparser.ast.stmt.SwitchEntry && sw != null) {
                Node self = p;
                sw.getChildNodes().stream()
                        .filter(x -> x instanceof com.github.javaparser.ast.stmt.SwitchEntry && x != self)
                        .forEach(siblings::add);
            } else if (p instanceof IfStmt i
                    && (i.getThenStmt() == child || i.getElseStmt().orElse(null) == child)) {
                Node arm = child;
                (i.getThenStmt() == arm ? i.getElseStmt() : Optional.of(i.getThenStmt())).ifPresent(siblings::add);
            }
            for (Node s : siblings) {
                Optional<Statement> silent = silentIn(s);
                if (silent.isPresent()) {
                    return silent;
                }
            }
            if (!siblings.isEmpty()) {
                return Optional.empty();
            }
            child = p;
        }
        return Optional.empty();
    }

    /** A block (or switch arm) in {@code n} that holds statements but only inert calls and no throw. */
    private static Optional<Statement> silentIn(Node n) {
        List<Statement> body = n instanceof com.github.javaparser.ast.stmt.SwitchEntry e
                ? e.getStatements()
                : n instanceof BlockStmt b ? b.getStatements() : n instanceof Statement st ? List.of(st) : List.of();
        if (body.size() == 1 && body.get(0) instanceof BlockStmt b) {
            body = b.getStatements(); // case X -> { … }
        }
        if (body.isEmpty()) {
            return Optional.empty();
        }
        boolean inert = body.stream()
                .allMatch(st -> st.findAll(com.github.javaparser.ast.stmt.ThrowStmt.class)
                                .isEmpty()
                        && !st.isReturnStmt()
                        && st.findAll(MethodCallExpr.class).stream()
                                .allMatch(
                                        c -> INERT.matcher(c.getNameAsString()).matches())
                        && st.findAll(ObjectCreationExpr.class).isEmpty());
        if (inert
                && body.stream()
                        .anyMatch(st -> !st.findAll(MethodCallExpr.class).isEmpty())) {
            return Optional.of(body.get(0));
        }
        // one level down: a retry-or-give-up if inside the arm (if (attempt < max) log… else deadLetter(…))
        for (Statement st : body) {
            if (st instanceof IfStmt i) {
                Optional<Statement> t = silentIn(i.getThenStmt());
                if (t.isPresent()) {
                    return t;
                }
                if (i.getElseStmt().isPresent()) {
                    Optional<Statement> e = silentIn(i.getElseStmt().get());
                    if (e.isPresent()) {
                        return e;
                    }
                }
            }
        }
        return Optional.empty();
    }

    /**
     * Acknowledgements of the last {@link #trace} made unconditionally in a {@code finally} block, each
     * with the effects its {@code try} block reaches: those are acknowledged whether they succeed or not.
     */
    Map<Event, List<Event>> finallyAcks() {
        return finallyAcks;
    }

    /**
     * The {@code try} block of the {@code try … finally} whose finally block runs this call whatever
     * happens: none when a condition (an {@code if}, a {@code switch}, a {@code ?:}) decides on the way.
     */
    private static <T> List<T> append(List<T> list, T last) {
        List<T> out = new ArrayList<>(list);
        out.add(last);
        return List.copyOf(out);
    }

    /**
     * {@link #finallyTry(Node)} of the ack, or, when the ack runs unconditionally in a method the handler called (an
     * acknowledging wrapper: {@code finally { acker.ack(channel, message); }}), of the call that led there.
     */
    private static Optional<FinallyAck> finallyTry(Node call, Frame f) {
        Optional<BlockStmt> t = finallyTry(call);
        if (t.isPresent() || !unconditional(call)) {
            return t.map(b -> new FinallyAck(call, b));
        }
        for (int i = f.sites.size() - 1; i >= 0; i--) {
            Node site = f.sites.get(i);
            t = finallyTry(site);
            if (t.isPresent() || !unconditional(site)) {
                return t.map(b -> new FinallyAck(site, b));
            }
        }
        return Optional.empty();
    }

    /** An ack made in a finally block ({@code at}: the ack, or the call to the wrapper making it) and its try block. */
    private record FinallyAck(Node at, BlockStmt tryBlock) {}

    /** Whether the call runs whenever its method does: nothing on the way up to the method decides or defers it. */
    private static boolean unconditional(Node call) {
        for (Node p = call.getParentNode().orElse(null);
                p != null;
                p = p.getParentNode().orElse(null)) {
            if (p instanceof MethodDeclaration) {
                return true;
            }
            if (p instanceof IfStmt
                    || p instanceof com.github.javaparser.ast.stmt.SwitchStmt
                    || p instanceof com.github.javaparser.ast.expr.ConditionalExpr
                    || p instanceof com.github.javaparser.ast.expr.BinaryExpr
                    || p instanceof LambdaExpr
                    || p instanceof com.github.javaparser.ast.stmt.CatchClause) {
                return false;
            }
        }
        return false;
    }

    private static Optional<BlockStmt> finallyTry(Node call) {
        Node child = call;
        for (Node p = call.getParentNode().orElse(null);
                p != null;
                p = p.getParentNode().orElse(null)) {
            if (p instanceof IfStmt
                    || p instanceof com.github.javaparser.ast.stmt.SwitchStmt
                    || p instanceof com.github.javaparser.ast.expr.ConditionalExpr
                    || p instanceof com.github.javaparser.ast.expr.BinaryExpr
                    || p instanceof LambdaExpr
                    || p instanceof MethodDeclaration) {
                return Optional.empty();
            }
            if (p instanceof TryStmt t && t.getFinallyBlock().orElse(null) == child) {
                return Optional.of(t.getTryBlock());
            }
            child = p;
        }
        return Optional.empty();
    }

    /**
     * The lambdas and method references the caller passed for parameters of this frame's method that {@code work}
     * calls ({@code process(event, e -> save(e), tenant)} into {@code eventProcessor.accept(event)} inside the try):
     * their work was walked where they are written, at the call, and it is the work this block runs. A parameter the
     * caller only passed on from its own parameters ({@code processTenantEvents(events, recordProcessor)}) is bound to
     * what that caller's own caller passed, up the calls that led here.
     */
    private static List<Node> boundTasks(BlockStmt work, Frame f) {
        if (f.method == null) {
            return List.of();
        }
        List<Node> out = new ArrayList<>();
        for (int i = 0; i < f.method.getParameters().size(); i++) {
            String param = f.method.getParameter(i).getNameAsString();
            if (!work.findAll(
                            MethodCallExpr.class,
                            c -> c.getScope()
                                    .filter(x -> x instanceof NameExpr n
                                            && n.getNameAsString().equals(param))
                                    .isPresent())
                    .isEmpty()) {
                Expression a = passedFor(f.method, i, f.sites, f.sites.size() - 1);
                if (a != null) {
                    out.add(a);
                }
            }
        }
        return out;
    }

    /**
     * The lambda or method reference given for parameter {@code i} of {@code method} at {@code sites[s]}, following a
     * name that is only a parameter of the calling method to the call of that method one site further out.
     */
    private static Expression passedFor(MethodDeclaration method, int i, List<Node> sites, int s) {
        if (s < 0
                || !(sites.get(s) instanceof MethodCallExpr site)
                || site.getArguments().size() != method.getParameters().size()) {
            return null;
        }
        Expression a = site.getArgument(i);
        if (a.isLambdaExpr() || a.isMethodReferenceExpr()) {
            return a;
        }
        MethodDeclaration caller = Types.ancestor(site, MethodDeclaration.class).orElse(null);
        if (!(a instanceof NameExpr n) || caller == null) {
            return null;
        }
        for (int j = 0; j < caller.getParameters().size(); j++) {
            if (caller.getParameter(j).getNameAsString().equals(n.getNameAsString())) {
                return passedFor(caller, j, sites, s - 1);
            }
        }
        return null;
    }

    /**
     * Batch sends of AWS's synchronous clients that answer with a list of the entries they failed to send rather than
     * throwing: the method, and the receiver types it is judged on.
     */
    private static final Map<String, Pattern> BATCH_SENDS = Map.of(
            "sendMessageBatch", Pattern.compile("SqsClient|AmazonSQS|AmazonSQSClient"),
            "publishBatch", Pattern.compile("SnsClient|AmazonSNS|AmazonSNSClient"),
            "putEvents", Pattern.compile("EventBridgeClient|AmazonEventBridge\\w*|AmazonCloudWatchEvents\\w*"),
            "putRecords", Pattern.compile("KinesisClient|AmazonKinesis|AmazonKinesisClient"),
            "putRecordBatch", Pattern.compile("FirehoseClient|AmazonKinesisFirehose\\w*"));

    /** What a batch response says failed: {@code failed()}, {@code getFailed()}, {@code failedEntryCount()}, …. */
    private static final Pattern FAILURES_READ =
            Pattern.compile("(get|has)?[Ff]ailed\\w*|(get)?[Ee]ntries|(get)?[Rr]ecords|(get)?[Rr]equestResponses");

    /**
     * {@code sqs.sendMessageBatch(…)} whose response is dropped, or kept only to be logged: the batch call succeeds
     * when some of its entries fail, listing them in the response, so a message moved to a dead-letter queue (or
     * forwarded) this way can fail to arrive while the message it came from is acknowledged.
     */
    private void partialFailuresIgnored(MethodCallExpr c, String name, String stype, Frame f) {
        Pattern owners = BATCH_SENDS.get(name);
        if (owners == null || stype == null || !owners.matcher(stype).matches() || failuresRead(c)) {
            return;
        }
        add(
                Event.Kind.DROPPED,
                c,
                f,
                null,
                null,
                "sends a batch (" + shortText(c) + ") and never reads which of its entries failed (the response's"
                        + " failed list): a batch call succeeds when some entries fail");
    }

    /** Whether the batch response is read for its failures, or handed on to code that may read them. */
    private static boolean failuresRead(MethodCallExpr c) {
        Node parent = c.getParentNode().orElse(null);
        if (parent instanceof MethodCallExpr chained && chained.getScope().orElse(null) == c) {
            return FAILURES_READ.matcher(chained.getNameAsString()).matches();
        }
        String held = parent instanceof VariableDeclarator v
                ? v.getNameAsString()
                : parent instanceof AssignExpr a && a.getTarget() instanceof NameExpr n ? n.getNameAsString() : null;
        if (held == null) {
            // returned, or an argument of another call: someone else looks at it
            return !(parent instanceof ExpressionStmt);
        }
        Node scope =
                Types.ancestor(c, MethodDeclaration.class).map(Node.class::cast).orElse(c);
        for (NameExpr use :
                scope.findAll(NameExpr.class, x -> x.getNameAsString().equals(held))) {
            Node p = use.getParentNode().orElse(null);
            if (p instanceof MethodCallExpr m && m.getScope().orElse(null) == use) {
                if (!m.getNameAsString().equals("toString")) {
                    return FAILURES_READ.matcher(m.getNameAsString()).matches()
                            || m.getNameAsString().matches("(get|has)?[Ss]uccessful\\w*");
                }
            } else if (!(p instanceof MethodCallExpr m
                    && LOG_LEVEL.matcher(m.getNameAsString()).matches())) {
                return true; // passed on, returned, compared: not only logged
            }
        }
        return false;
    }

    /**
     * A Kafka Connect source task's {@code commit()} that does more than log: the worker calls it when it commits
     * source offsets, and those cover only the records it has written to Kafka, so acknowledging the source there for
     * every job in flight acknowledges records still on their way; {@code commitRecord(record, metadata)} is called
     * once each record is written.
     */
    private void sourceTaskCommit(Frame top) {
        TypeDeclaration<?> t = Types.enclosingType(entry.body);
        for (MethodDeclaration m : t == null ? List.<MethodDeclaration>of() : t.getMethodsByName("commit")) {
            BlockStmt body = m.getBody().orElse(null);
            if (!m.getParameters().isEmpty() || body == null || body.isEmpty() || onlyLogs(body)) {
                continue;
            }
            add(
                    Event.Kind.EARLY_ACK,
                    body.getStatement(0),
                    top,
                    null,
                    null,
                    "SourceTask.commit() acknowledges the source for everything in flight ("
                            + shortText(body.getStatement(0)) + "), but the worker calls it when it commits source"
                            + " offsets, which cover only the records already written to Kafka: a record still on its way"
                            + " is acknowledged upstream and lost if that write fails or the worker dies. Acknowledge"
                            + " each record in commitRecord(record, metadata)");
        }
    }

    /** Names of the temp files (and their streams) the trace saw messages written to: a call taking one drains them. */
    private final Set<String> tempFiles = new HashSet<>();

    /**
     * The message put where a later stage picks it up on its own schedule ({@link Event.Kind#BUFFER}): a hand-off the
     * effect catalogue lists ({@code fluxSink.next(record)}, {@code queue.offer(message)}), a write to a stream opened
     * on a temp file that is stored only later, or a call on a parameter the caller bound to one of those ({@code
     * onRecord.accept(record)} given {@code fluxSink::next}).
     */
    private boolean buffers(MethodCallExpr c, String stype, Frame f) {
        String what = handedTo(c, stype);
        if (what == null && c.getScope().orElse(null) instanceof NameExpr p && f.method != null) {
            for (int i = 0; i < f.method.getParameters().size() && what == null; i++) {
                if (f.method.getParameter(i).getNameAsString().equals(p.getNameAsString())) {
                    what = boundBuffer(passedFor(f.method, i, f.sites, f.sites.size() - 1));
                }
            }
            if (what == null && !shadowed(p.getNameAsString(), c, f.method)) {
                // a handler held in a field of the class, given to its constructor where the class is made
                // (Kestra's ConsumeThread: consumer.accept(message) on the lambda Consume wrote the temp file with)
                what = boundBuffer(constructedWith(p.getNameAsString(), c));
            }
        }
        if (what == null) {
            return false;
        }
        addBuffer(c, f, what);
        return true;
    }

    /**
     * A {@link Event.Kind#BUFFER} event, {@code keyed} when what is buffered is not the message (a metric, a
     * timestamp: the names holding the message's data are known and none goes in) or the file that buffers also
     * acknowledges messages (the ack made after the drain, {@link Buffers#drainAcknowledges}): a listener acknowledged
     * on return then hands no acknowledged work to the buffer.
     */
    private void addBuffer(Node at, Frame f, String what) {
        add(Event.Kind.BUFFER, at, f, null, null, what);
        // what goes in: the call's arguments, or for a method reference the elements its caller iterates
        Node given = at instanceof MethodReferenceExpr r && r.getParentNode().orElse(null) instanceof MethodCallExpr p
                ? p
                : at instanceof MethodCallExpr c
                        ? new com.github.javaparser.ast.expr.ArrayInitializerExpr(new NodeList<>(
                                c.getArguments().stream().map(Expression::clone).toList()))
                        : at;
        boolean message = f.data == null || Dataflow.mentions(given, f.data);
        if (!message || Buffers.drainAcknowledges(at)) {
            Event b = events.remove(events.size() - 1);
            events.add(new Event(
                    b.kind(),
                    b.seq(),
                    b.location(),
                    b.path(),
                    b.blast(),
                    b.category(),
                    b.what(),
                    b.tx(),
                    b.txLocation(),
                    true,
                    b.member(),
                    b.handedOff(),
                    b.arms()));
        }
    }

    /**
     * What the lambda or method reference bound to a handler does when it only buffers the message, looking through a
     * wrapper that adapts it ({@code throwConsumer(message -> …)}, {@code Unchecked.consumer(…)}); null for anything
     * else.
     */
    private String boundBuffer(Expression a) {
        if (a instanceof MethodCallExpr w
                && w.getArguments().size() == 1
                && (w.getArgument(0).isLambdaExpr() || w.getArgument(0).isMethodReferenceExpr())) {
            a = w.getArgument(0);
        }
        if (a instanceof MethodReferenceExpr r) {
            return bufferReference(r);
        }
        if (a instanceof LambdaExpr l) {
            return l.getBody().findAll(MethodCallExpr.class).stream()
                    .map(x -> handedTo(x, x.getScope().map(types::typeOf).orElse(null)))
                    .filter(java.util.Objects::nonNull)
                    .findFirst()
                    .orElse(null);
        }
        return null;
    }

    /**
     * The variables a method declares, by name, in source order: read once per method (asked per call on a name in
     * every traced frame, a walk of the whole body each time made a long method's trace quadratic).
     */
    private Map<String, List<VariableDeclarator>> declarators(MethodDeclaration m) {
        return declaratorsOf.computeIfAbsent(m, k -> {
            Map<String, List<VariableDeclarator>> byName = new HashMap<>();
            k.walk(
                    VariableDeclarator.class,
                    v -> byName.computeIfAbsent(v.getNameAsString(), n -> new ArrayList<>())
                            .add(v));
            return byName;
        });
    }

    private final Map<MethodDeclaration, Map<String, List<VariableDeclarator>>> declaratorsOf = new IdentityHashMap<>();

    /** The calls made in a type, by method name, in source order: read once per type. */
    private Map<String, List<MethodCallExpr>> callsIn(TypeDeclaration<?> t) {
        return callsOf.computeIfAbsent(t, k -> {
            Map<String, List<MethodCallExpr>> byName = new HashMap<>();
            k.walk(
                    MethodCallExpr.class,
                    c -> byName.computeIfAbsent(c.getNameAsString(), n -> new ArrayList<>())
                            .add(c));
            return byName;
        });
    }

    private final Map<TypeDeclaration<?>, Map<String, List<MethodCallExpr>>> callsOf = new IdentityHashMap<>();

    /** A parameter or local of {@code method}, or of a lambda around {@code at}, named {@code name}. */
    private boolean shadowed(String name, Node at, MethodDeclaration method) {
        if (method.getParameters().stream().anyMatch(x -> x.getNameAsString().equals(name))
                || declarators(method).containsKey(name)) {
            return true;
        }
        for (Node p = at.getParentNode().orElse(null);
                p != null && p != method;
                p = p.getParentNode().orElse(null)) {
            if (p instanceof LambdaExpr l
                    && l.getParameters().stream()
                            .anyMatch(x -> x.getNameAsString().equals(name))) {
                return true;
            }
        }
        return false;
    }

    /**
     * The argument given for field {@code field} of the class around {@code at} where that class is made in the same
     * file ({@code new ConsumeThread(…, consumer, …)}): a constructor assigns the field from its parameter, and the
     * {@code new} of the class with as many arguments passes the value. Null when no constructor or no creation says.
     * Answered once per class and field: asked for every call on a field in every traced frame, and a class its file
     * never makes (an injected bean) walked the whole file each time (snomed-release-service: a fifth of the scan).
     */
    private Expression constructedWith(String field, Node at) {
        TypeDeclaration<?> owner = Types.enclosingType(at);
        if (owner == null) {
            return null;
        }
        return constructedWithOf
                .computeIfAbsent(owner, k -> new HashMap<>())
                .computeIfAbsent(field, k -> Optional.ofNullable(constructedWith(field, owner)))
                .orElse(null);
    }

    private final Map<TypeDeclaration<?>, Map<String, Optional<Expression>>> constructedWithOf =
            new IdentityHashMap<>();

    private static Expression constructedWith(String field, TypeDeclaration<?> owner) {
        if (owner.getFieldByName(field).isEmpty()) {
            return null;
        }
        for (com.github.javaparser.ast.body.ConstructorDeclaration k : owner.getConstructors()) {
            for (AssignExpr a : k.getBody().findAll(AssignExpr.class)) {
                Expression target = a.getTarget();
                boolean toField = target instanceof FieldAccessExpr fa
                                && fa.getScope() instanceof ThisExpr
                                && fa.getNameAsString().equals(field)
                        || target instanceof NameExpr n && n.getNameAsString().equals(field);
                if (!toField || !(a.getValue() instanceof NameExpr v)) {
                    continue;
                }
                for (int i = 0; i < k.getParameters().size(); i++) {
                    if (!k.getParameter(i).getNameAsString().equals(v.getNameAsString())) {
                        continue;
                    }
                    int index = i;
                    int arity = k.getParameters().size();
                    Optional<ObjectCreationExpr> made = owner.findCompilationUnit()
                            .flatMap(cu -> cu.findFirst(
                                    ObjectCreationExpr.class,
                                    o -> o.getType().getNameAsString().equals(owner.getNameAsString())
                                            && o.getArguments().size() == arity));
                    if (made.isPresent()) {
                        return made.get().getArgument(index);
                    }
                }
            }
        }
        return null;
    }

    /** What a call that only buffers the message does, as a finding says it; null for any other call. */
    private String handedTo(MethodCallExpr c, String stype) {
        String owner = c.getScope().map(x -> Buffers.madeAs(types, stype, x)).orElse(stype);
        if (owner != null && !types.isRepoType(owner)) {
            Optional<Catalogue.Rule> hit = Catalogue.get().match(owner, c.getNameAsString(), Repo.printed(c));
            if (hit.filter(Catalogue.Rule::handOff).isPresent()) {
                return hit.get().what() + " (" + shortText(c) + ")";
            }
        }
        if (TEMP_WRITE.matcher(c.getNameAsString()).matches()) {
            List<Expression> held = new ArrayList<>(c.getArguments());
            c.getScope().ifPresent(held::add);
            for (Expression h : held) {
                List<String> chain = new ArrayList<>();
                if (h instanceof NameExpr n && tempFile(n.getNameAsString(), c, chain, 0)) {
                    // the stream written to is the first link; the files it is opened on are what a later call takes
                    tempFiles.addAll(chain.subList(1, chain.size()));
                    return "writes it to a temp file (" + shortText(c) + ") that is stored only later";
                }
            }
        }
        return null;
    }

    /** The type of the object a method reference is bound to ({@code fluxSink::next}); null for a type's method. */
    private String referenceOwner(MethodReferenceExpr r) {
        Expression scope = r.getScope();
        // service::apply parses as a type expression; a lower-case name is a variable or field
        String owner =
                scope.isTypeExpr() && Character.isLowerCase(scope.toString().charAt(0))
                        ? Optional.ofNullable(types.declaredType(scope, scope.toString()))
                                .map(Types::simple)
                                .orElse(null)
                        : scope.isTypeExpr() ? null : types.typeOf(scope);
        return Buffers.madeAs(types, owner, scope);
    }

    /** Whether the file {@code at} is in imports a package starting with {@code prefix}. */
    private static boolean imports(Node at, String prefix) {
        return at.findCompilationUnit()
                .map(cu -> importNames(cu).stream().anyMatch(i -> i.startsWith(prefix)))
                .orElse(false);
    }

    private static final com.github.javaparser.ast.DataKey<List<String>> IMPORTS =
            new com.github.javaparser.ast.DataKey<>() {};

    /**
     * A file's imports as text, kept on the file: asked at nearly every call walked (is this the JAX-RS client, a
     * reactor publisher), and a name's text is built afresh from its parts each time.
     */
    private static List<String> importNames(com.github.javaparser.ast.CompilationUnit cu) {
        if (!cu.containsData(IMPORTS)) {
            cu.setData(
                    IMPORTS,
                    cu.getImports().stream()
                            .map(com.github.javaparser.ast.ImportDeclaration::getNameAsString)
                            .toList());
        }
        return cu.getData(IMPORTS);
    }

    /** {@code fluxSink::next}, {@code queue::offer}: a reference to a catalogued hand-off; null for any other. */
    private String bufferReference(MethodReferenceExpr r) {
        String owner = referenceOwner(r);
        if (owner == null || types.isRepoType(owner)) {
            return null;
        }
        return Catalogue.get()
                .match(owner, r.getIdentifier(), Repo.printed(r))
                .filter(Catalogue.Rule::handOff)
                .map(x -> x.what() + " (" + Repo.printed(r) + ")")
                .orElse(null);
    }

    /** A call that writes what it is given: {@code FileSerde.write(output, message)}, {@code writer.append(line)}. */
    private static final Pattern TEMP_WRITE = Pattern.compile("write\\w*|append|print(ln|f)?");

    /**
     * Whether {@code name}, where {@code at} uses it, was opened on a temp file: a local whose initializer is (or
     * wraps a local that is) a {@code createTempFile(…)} result, following a parameter to the calls of its method in
     * the same class. {@code chain} gets the names followed, the stream first.
     */
    private boolean tempFile(String name, Node at, List<String> chain, int depth) {
        MethodDeclaration m = Types.ancestor(at, MethodDeclaration.class).orElse(null);
        if (m == null || depth > 4) {
            return false;
        }
        chain.add(name);
        for (VariableDeclarator v : declarators(m).getOrDefault(name, List.of())) {
            Expression init = v.getInitializer().orElse(null);
            if (init == null) {
                continue;
            }
            if (!init.findAll(MethodCallExpr.class, x -> x.getNameAsString().equals("createTempFile"))
                    .isEmpty()) {
                return true;
            }
            for (NameExpr inner : init.findAll(NameExpr.class)) {
                if (!inner.getNameAsString().equals(name) && tempFile(inner.getNameAsString(), v, chain, depth + 1)) {
                    return true;
                }
            }
        }
        for (int i = 0; i < m.getParameters().size(); i++) {
            if (!m.getParameter(i).getNameAsString().equals(name)) {
                continue;
            }
            TypeDeclaration<?> t = Types.enclosingType(m);
            int index = i;
            for (MethodCallExpr call : t == null
                    ? List.<MethodCallExpr>of()
                    : callsIn(t).getOrDefault(m.getNameAsString(), List.of()).stream()
                            .filter(x ->
                                    x.getArguments().size() == m.getParameters().size())
                            .toList()) {
                if (call.getArgument(index) instanceof NameExpr passed
                        && tempFile(passed.getNameAsString(), call, chain, depth + 1)) {
                    return true;
                }
            }
        }
        chain.remove(chain.size() - 1);
        return false;
    }

    /** Whether an event's path passes through a block (a call made in it, or the event itself). */
    private boolean within(Event x, Node b) {
        Location from = repo.loc(b);
        int end = b.getEnd().map(pos -> pos.line).orElse(from.line());
        return x.path().stream()
                .map(Step::location)
                .anyMatch(l -> l.file().equals(from.file()) && l.line() >= from.line() && l.line() <= end);
    }

    private boolean library(MethodCallExpr c, String name, String stype, String scopeText, Frame f) {
        boolean repoType = types.isRepoType(stype);
        boolean library = !repoType && stype != null;
        String text = library || scopeText.contains("creator(") ? Repo.printed(c) : "";
        String member = library ? memberText(f) : "";
        if (!repoType && stype != null && publisher(stype) && PUBLISH_NAMES.contains(name)) {
            boolean stable = member.matches(
                    "(?s).*(?i)(\"event[-_ ]?id\"|\"message[-_ ]?id\"|idempotency|messageDeduplicationId).*");
            // a reply to a request (sent to its reply-to address, or carrying its correlation id): the
            // requester matches replies by correlation id and drops a second one, so a repeat is harmless
            boolean reply = REPLY_CALL.matcher(text).matches()
                    || REPLY_MEMBER.matcher(member).matches();
            // a send through the template of a listener whose container runs a Kafka transaction
            // commits with the consumed offset: a redelivery aborts the first attempt's record
            boolean transacted = entry.kafkaTransaction != null && KAFKA_TEMPLATES.contains(stype);
            // a JMS send in a listener whose container runs a JTA transaction goes through the module's XA
            // connection factory: it is rolled back with the receive, so a redelivery follows no sent copy
            boolean xa = entry.jtaTransaction != null && JMS_TEMPLATES.contains(stype);
            effect(
                    c,
                    f,
                    Blast.MESSAGE,
                    Event.Category.PUBLISH,
                    (reply ? "replies with " : "publishes ") + stype + "." + name
                            + (transacted ? " in the listener's Kafka transaction" : "")
                            + (xa ? " in the listener's JTA transaction" : ""),
                    stable || reply || transacted || xa);
            return true;
        }
        if (!repoType
                        && (stype != null
                                && NOTIFIERS.contains(stype)
                                && (name.startsWith("send") || name.equals("publish")))
                || name.equals("create") && scopeText.contains("Message.creator(")) {
            effect(
                    c,
                    f,
                    Blast.NOTIFICATION,
                    Event.Category.EXTERNAL,
                    "sends a notification (" + shortText(c) + ")",
                    keyed(text, member));
            add(Event.Kind.REMOTE, c, f, null, null, shortText(c));
            return true;
        }
        if (!repoType
                && stype != null
                && MONEY_VERB.matcher(name).matches()
                && (MONEY_SDK.contains(stype) || stype.matches(".*(Stripe|Braintree|Adyen|PayPal|Payment).*"))) {
            effect(
                    c,
                    f,
                    Blast.MONEY,
                    Event.Category.EXTERNAL,
                    "moves money (" + shortText(c) + ")",
                    keyed(text, member));
            add(Event.Kind.REMOTE, c, f, null, null, shortText(c));
            return true;
        }
        if (http(c, name, stype, scopeText, f)) {
            return true;
        }
        if ((name.equals("openStream") || name.equals("openConnection"))
                && ("URL".equals(stype) || scopeText.contains("new URL(") || scopeText.contains("toURL()"))) {
            add(Event.Kind.REMOTE, c, f, null, null, shortText(c));
            if (name.equals("openStream") || !member.contains("setReadTimeout")) {
                add(Event.Kind.SLOW, c, f, null, null, "URL." + name + "() has no read timeout");
            }
            return true;
        }
        boolean cacheScope = stype != null && CACHES.contains(stype)
                || scopeText.contains("opsFor")
                || scopeText.toLowerCase(Locale.ROOT).contains("redis")
                || scopeText.toLowerCase(Locale.ROOT).contains("cache");
        if (!repoType && cacheScope) {
            if (name.matches("incr\\w*|increment\\w*|decr\\w*|decrement\\w*|hincrBy\\w*")) {
                effect(
                        c,
                        f,
                        Blast.DATA,
                        Event.Category.EXTERNAL,
                        "increments a counter in " + (stype == null ? "the store" : stype),
                        false);
                return true;
            }
            if (name.matches("(right|left)Push(All)?|[lr]push\\w*")) {
                // a list grows by one entry per call: a redelivery appends the entry again
                effect(
                        c,
                        f,
                        Blast.DATA,
                        Event.Category.EXTERNAL,
                        "appends to a list in " + (stype == null ? "the store" : stype),
                        false);
                return true;
            }
            if (name.matches("setIfAbsent|putIfAbsent|setnx|setNX") && dedupeClaim(c)) {
                // SETNX on a "processed"/"dedup" key decides whether the handler goes on: a claim, but in another
                // store, committed apart from the effect it guards
                add(
                        Event.Kind.WEAK,
                        c,
                        f,
                        null,
                        null,
                        "claims the event with " + name + " in " + (stype == null ? "the cache" : stype)
                                + ", apart from the effect it guards: when the effect fails after the claim, the redelivery"
                                + " finds the key and skips it (and the key expires)");
                return true;
            }
            if (name.matches("put|set|setex|hset|putAll|setIfAbsent|putIfAbsent|mset")) {
                // a value stored under a key replaces itself: a repeat writes the same entry again. Only a value
                // read back from the same store first (a count or a list grown in place) moves on a repeat
                String store = c.getScope().map(Object::toString).orElse("");
                String method = Types.ancestor(c, MethodDeclaration.class)
                        .map(Object::toString)
                        .orElse("");
                // (a read only tested for membership, entries(k).containsKey(id), is the dedupe check, not a value)
                boolean readBack = !store.isEmpty()
                        && Pattern.compile("(?s).*" + Pattern.quote(store)
                                        + "\\s*\\.\\s*(h?get|hmget|entries)\\s*\\([^()]*(?:\\([^()]*\\)[^()]*)*\\)"
                                        + "(?!\\s*\\.\\s*(containsKey|contains)\\s*\\().*")
                                .matcher(method)
                                .matches();
                effect(
                        c,
                        f,
                        Blast.CACHE,
                        Event.Category.CACHE,
                        "writes the cache (" + shortText(c) + ")"
                                + (readBack ? " with a value read from it first" : ""),
                        name.contains("IfAbsent") || !readBack);
                return true;
            }
        }
        if (stype != null
                && (types.isSpringDataRepository(stype) || stype.equals("EntityManager") || stype.equals("Session"))
                && name.matches("save|saveAll|saveAndFlush|persist|insert|merge")) {
            save(c, stype, f);
            return true;
        }
        if (name.startsWith("set")
                && name.length() > 3
                && c.getArguments().size() == 1
                && isDelta(
                        c.getArgument(0),
                        name.substring(3),
                        c.getScope().map(Object::toString).orElse(""))) {
            f.counter = true;
            String field = name.substring(3);
            String owner = c.getScope().map(types::typeOf).orElse("");
            effect(
                    c,
                    f,
                    MONEY.matcher(field + " " + owner).matches() ? Blast.MONEY : Blast.DATA,
                    Event.Category.DATABASE,
                    "moves " + (owner.isEmpty() ? "" : owner + ".") + decapitalize(field) + " by a delta ("
                            + shortText(c) + ")",
                    false);
            return true;
        }
        if (appendsToStored(c, f)) {
            f.counter = true;
            MethodCallExpr getter = (MethodCallExpr) c.getScope().get();
            effect(
                    c,
                    f,
                    Blast.DATA,
                    Event.Category.DATABASE,
                    "appends to " + decapitalize(getter.getNameAsString().substring(3)) + " of a stored record ("
                            + shortText(c) + ")",
                    false);
            return true;
        }
        return !repoType && (catalogued(c, stype, f) || collaboratorWrite(c, stype, f));
    }

    /**
     * {@code card.getPayments().add(payment)} where the same method saves {@code card} through a
     * repository: the stored list grows by one on every delivery, a delta like {@code balance + x}.
     * A list on an object never saved (a reply, a report being built) is not an effect.
     */
    private boolean appendsToStored(MethodCallExpr c, Frame f) {
        if (!c.getNameAsString().equals("add")
                || c.getArguments().size() != 1
                || !(c.getScope().orElse(null) instanceof MethodCallExpr getter)
                || !getter.getArguments().isEmpty()
                || !getter.getNameAsString().matches("get[A-Z]\\w*")
                || !(getter.getScope().orElse(null) instanceof NameExpr owner)) {
            return false;
        }
        String held = types.typeOf(getter);
        if (held != null && held.matches("(Hash|Tree|LinkedHash|Sorted)?Set(<.*)?")) {
            return false; // a set ignores the repeat
        }
        String v = Pattern.quote(owner.getNameAsString());
        return Pattern.compile("\\.save(All|AndFlush)?\\(\\s*" + v + "\\s*\\)|\\w+::save\\b")
                .matcher(memberText(f))
                .find();
    }

    /**
     * A call the effect catalogue knows ({@code dev/once/scan/effects.txt}): an effect of its kind and
     * blast radius, keyed when the catalogue's idempotent-shape pattern matches, or nothing for a write
     * that is idempotent by construction (an upsert by key, a document indexed by its id).
     */
    private boolean catalogued(MethodCallExpr c, String stype, Frame f) {
        String owner = stype != null ? stype : staticOwner(c);
        if (owner == null
                && c.getScope().orElse(null) instanceof MethodCallExpr ops
                && ops.getNameAsString().matches("opsFor[A-Z]\\w*")) {
            // Spring Data Redis: opsForStream() is a StreamOperations, opsForValue() a ValueOperations
            owner = ops.getNameAsString().substring("opsFor".length()) + "Operations";
        }
        Optional<Catalogue.Rule> hit = Catalogue.get().match(owner, c.getNameAsString(), Repo.printed(c));
        if (hit.isEmpty()) {
            return false;
        }
        Catalogue.Rule r = hit.get();
        if (r.idempotent() || r.handOff()) {
            // a hand-off only buffers the message ({@link #buffers} records it): no effect of its own
            return true;
        }
        boolean keyed = r.keyedBy(Repo.printed(c) + "\n" + memberText(f));
        effect(c, f, r.blast(), r.category(), r.what() + " (" + shortText(c) + ")", keyed);
        if (r.category() == Event.Category.EXTERNAL) {
            add(Event.Kind.REMOTE, c, f, null, null, shortText(c));
        }
        return true;
    }

    /**
     * A write verb: the call makes something new each time it runs (a row, a message, a charge, a process). Setting,
     * putting, replacing, upserting, indexing and updating by key write the same thing again on a repeat; they are not
     * here. A save or persist is here only when it stores an object the handler has just built.
     */
    private static final Pattern WRITE_VERB = Pattern.compile(
            "(save|persist|insert|create|add|append|send|post|publish|emit|produce|enqueue|push|dispatch|notify|charge"
                    + "|pay|transfer|refund|debit|credit|withdraw|deposit|submit|execute|trigger|start|book|reserve|place"
                    + "|register|issue|increment|incr)([A-Z0-9_]\\w*)?");

    /**
     * A conversion named for what it turns one value into ({@code creditEntryToEntity}, {@code orderAsDto}), not a
     * verb sending somewhere ({@code sendToQueue}, {@code addToCart}).
     */
    private static final Pattern MAPPING = Pattern.compile(
            "(?!(send|publish|post|emit|push|enqueue|dispatch|add|append|transfer|pay|charge|submit)(To|Into)[A-Z])"
                    + "\\w+(To|As|Into)[A-Z]\\w*|\\w*(Dto|Entity|Model|Mapper)\\w*");

    /**
     * Receivers whose calls stay in the process: collections, builders, metrics, loggers, executors, reactive sinks,
     * server-sent events, JSON mappers, in-process events, values.
     */
    private static final Pattern IN_PROCESS = Pattern.compile(
            "(?:\\w*(List|Map|Set|Collection|BlockingQueue|BlockingDeque|Stack|Vector|Iterable|Multimap|Builder|Buffer"
                    + "|Array|Optional|Stream|Adder|Accumulator|Logger|Log|Registry|Meter|Counter|Gauge|Timer|Summary"
                    + "|Histogram|Gson|Json|Executor|ExecutorService|Scheduler|Latch|Semaphore|Lock|Thread|Clock|Random"
                    + "|Sink|Sinks|Flux|Mono|Observable|Subject|SseEmitter|Context|Model|Response|Request|Writer|Tracer"
                    + "|Span|Validator|Factory|Printer|PrintStream)|Atomic\\w*|Queue|Deque|ArrayDeque"
                    + "|ConcurrentLinkedQueue|PriorityQueue|ObjectMapper|ApplicationEventPublisher|String|Object"
                    + "|BigDecimal|BigInteger|Instant|Duration|Period|Local\\w*|Zoned\\w*|Offset\\w*|Integer|Long|Double"
                    + "|Float|Short|Byte|Boolean|Character|Number|UUID|URI|URL|Path|File|[A-Z][0-9]?)");

    /** Receivers other rules judge by their SQL, their HTTP verb or their topic, and their own sessions and managers. */
    private static final Pattern JUDGED_ELSEWHERE = Pattern.compile(
            "\\w*(Template|Operations|Connection|Statement|DataSource|TransactionManager|Session)|CacheManager"
                    + "|EntityManager");

    /** A name the project gives a store it writes to. */
    private static final Pattern STORE_NAME = Pattern.compile(
            "(?i).*(repositor|repo\\b|dao\\b|mapper\\b|store\\b|storage|database|persist|ledger|journal).*");
    /** A name the project gives a channel it sends messages through. */
    private static final Pattern CHANNEL_NAME =
            Pattern.compile("(?i).*(publisher|producer|sender|queue|bus\\b|broker|topic|outbound|messag|event).*");

    private static final Pattern KEYED_CALL = Pattern.compile(
            "(?s).*(?i)(idempotency[-_ ]?key|idempotencykey|requestId\\(|clientToken|deduplicationId).*");

    /**
     * A write verb called on a collaborator of the handler's class (a field: an injected client, gateway, repository
     * or queue the scan cannot follow because its code is not in the repository, or is an interface nothing here
     * implements) with the message's data in its arguments: whatever the API, the message's effect leaves the process
     * there, and a repeat of the message makes it again. A call with none of the message's data (a heartbeat, a
     * metric, a timestamp) is bookkeeping, not the message's effect.
     */
    private boolean collaboratorWrite(MethodCallExpr c, String stype, Frame f) {
        // read in English: a team naming its methods in its own language writes with lagre(…) as others save(…)
        String name = Verbs.get().english(c.getNameAsString());
        // the message's data has to be handed over as a value: a call given only code (a lambda, a method reference)
        // runs it (a circuit breaker, a retry wrapper), and the trace walks that code where it is written
        List<Expression> values = c.getArguments().stream()
                .filter(a -> !a.isLambdaExpr() && !a.isMethodReferenceExpr())
                .toList();
        if (!WRITE_VERB.matcher(name).matches() || MAPPING.matcher(name).matches() || values.isEmpty()) {
            return false;
        }
        String field = collaborator(c);
        if (field == null
                || c.getScope()
                        .get()
                        .findFirst(Node.class, effectNodes::contains)
                        .isPresent()) {
            return false; // a client call whose receiver chain made the effect already (stripe.refunds().create(…))
        }
        String type = stype != null
                ? stype
                : Optional.ofNullable(types.fieldType(Types.enclosingType(c), field, 0))
                        .map(Types::simple)
                        .orElse(null);
        if (type == null
                || IN_PROCESS.matcher(type).matches()
                || JUDGED_ELSEWHERE.matcher(type).matches()
                || types.isSpringDataRepository(type)) {
            return false;
        }
        if (f.data != null && values.stream().noneMatch(a -> Dataflow.mentions(a, f.data))) {
            return false;
        }
        String what = type + "." + c.getNameAsString();
        boolean keyed =
                KEYED_CALL.matcher(Repo.printed(c) + "\n" + memberText(f)).matches();
        if (name.matches("(save|persist)\\w*")) {
            // a save of an object loaded or passed in is an update by its key; only a freshly built one is a new row
            boolean built = c.getArguments().stream().anyMatch(a -> {
                Node made = created(a, f);
                return made instanceof ObjectCreationExpr
                        || made instanceof MethodCallExpr m
                                && m.getNameAsString().matches("build|of|from\\w*|to\\w*|create\\w*|new\\w*|map\\w*");
            });
            effect(
                    c,
                    f,
                    Blast.DATA,
                    Event.Category.DATABASE,
                    built
                            ? "saves a new record through " + what + ", which nothing here shows to be keyed"
                            : "writes a record in place through " + what,
                    keyed || !built);
            return true;
        }
        if (STORE_NAME.matcher(type + " " + field).matches() || name.matches("insert\\w*")) {
            effect(
                    c,
                    f,
                    Blast.DATA,
                    Event.Category.DATABASE,
                    "writes through " + what + " (" + shortText(c) + ")",
                    keyed);
        } else if (CHANNEL_NAME.matcher(type + " " + field).matches()
                && name.matches("(send|publish|emit|produce|enqueue|push|dispatch)\\w*")
                && !NOTIFY.matcher(type + " " + name).matches()) {
            effect(
                    c,
                    f,
                    Blast.MESSAGE,
                    Event.Category.PUBLISH,
                    "sends through " + what + " (" + shortText(c) + ")",
                    keyed);
        } else {
            effect(c, f, Blast.DATA, Event.Category.EXTERNAL, "calls " + what + " (" + shortText(c) + ")", keyed);
            add(Event.Kind.REMOTE, c, f, null, null, shortText(c));
        }
        return true;
    }

    /**
     * The field of the enclosing class the call's receiver chain starts from ({@code client.send(…)},
     * {@code this.client.orders().create(…)}), or null for a local, a parameter, a static call or a call on a result.
     */
    private String collaborator(MethodCallExpr c) {
        Expression s = c.getScope().orElse(null);
        while (s instanceof MethodCallExpr m && m.getScope().isPresent()) {
            s = m.getScope().get();
        }
        String field = s instanceof NameExpr n
                ? n.getNameAsString()
                : s instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr ? fa.getNameAsString() : null;
        if (field == null || Character.isUpperCase(field.charAt(0))) {
            return null;
        }
        TypeDeclaration<?> owner = Types.enclosingType(c);
        if (owner == null || types.fieldType(owner, field, 0) == null) {
            return null;
        }
        if (s instanceof NameExpr) {
            // a local or a parameter of the same name hides the field
            for (Node p = c.getParentNode().orElse(null);
                    p != null;
                    p = p.getParentNode().orElse(null)) {
                if (p instanceof com.github.javaparser.ast.body.CallableDeclaration<?> cd) {
                    if (cd.getParameters().stream()
                                    .anyMatch(x -> x.getNameAsString().equals(field))
                            || !cd.findAll(
                                            VariableDeclarator.class,
                                            v -> v.getNameAsString().equals(field))
                                    .isEmpty()) {
                        return null;
                    }
                    break;
                }
                if (p instanceof LambdaExpr l
                        && l.getParameters().stream()
                                .anyMatch(x -> x.getNameAsString().equals(field))) {
                    return null;
                }
            }
        }
        return field;
    }

    /**
     * A set-if-absent used as a dedupe: its key, or the method it is made in, names what a claim names
     * (processed, dedup, duplicate, idempotency, seen, already).
     */
    private static boolean dedupeClaim(MethodCallExpr c) {
        String key = c.getArguments().isEmpty() ? "" : c.getArgument(0).toString();
        String method = Types.ancestor(c, MethodDeclaration.class)
                .map(MethodDeclaration::getNameAsString)
                .orElse("");
        return CLAIM_WORDS.matcher(key).find() || CLAIM_WORDS.matcher(method).find();
    }

    private static final Pattern CLAIM_WORDS =
            Pattern.compile("(?i)processed|dedup|duplicate|idempot|seen|already|consumed");

    /**
     * {@code pending.merge(key, 1, Long::sum)} on a field of a class whose {@code @Scheduled} method drains that field:
     * the work is handed to the timer's thread, which does it later. A hand-off (an ack after it acknowledges work not
     * yet done), and the drain's effects are followed as work on that other thread.
     */
    private boolean deferredToTimer(MethodCallExpr c, String name, Frame f) {
        Expression scope = c.getScope().orElse(null);
        if (!BUFFER_WRITES.contains(name) || scope == null || f.depth >= MAX_DEPTH) {
            return false;
        }
        String field = scope instanceof NameExpr n
                ? n.getNameAsString()
                : scope instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr
                        ? fa.getNameAsString()
                        : null;
        TypeDeclaration<?> owner = Types.enclosingType(c);
        if (field == null
                || owner == null
                || owner.getFieldByName(field).isEmpty()
                || f.method != null && declarators(f.method).containsKey(field)) {
            return false;
        }
        Set<MethodDeclaration> scheduled = scheduledByCall(owner);
        for (MethodDeclaration timer : owner.getMethods()) {
            boolean annotated = Types.annotated(timer.getAnnotations(), "Scheduled");
            if (!annotated && !scheduled.contains(timer)
                    || timer.getBody().isEmpty()
                    || Visiting.contains(f.visiting, timer)
                    || !drains(owner, timer, field, 0)) {
                continue;
            }
            String how = annotated ? "@Scheduled" : "scheduled";
            add(
                    Event.Kind.ASYNC,
                    c,
                    f,
                    null,
                    null,
                    shortText(c) + ", a buffer " + owner.getNameAsString() + "." + timer.getNameAsString() + " (" + how
                            + ") drains later");
            List<Step> path = new ArrayList<>(f.path);
            path.add(new Step(owner.getNameAsString() + "." + timer.getNameAsString() + " (" + how + ")", repo.loc(c)));
            Visiting visiting = Visiting.with(f.visiting, timer);
            span(timer);
            Frame drain = new Frame(f.depth + 1, List.copyOf(path), null, null, visiting, owner, timer);
            drain.async = repo.loc(c);
            drain.arms = arms(c, f);
            visit(timer.getBody().get(), drain);
            return true;
        }
        return false;
    }

    /**
     * Methods of {@code owner} it gives to a scheduler itself, {@code taskScheduler.schedule(this::flush, trigger)}
     * or {@code scheduleAtFixedRate(() -> flush(), …)}: timers as much as an {@code @Scheduled} method is.
     */
    private Set<MethodDeclaration> scheduledByCall(TypeDeclaration<?> owner) {
        // read once per class: asked for each buffer write ({@code map.put}, {@code list.add}) in every traced frame, a
        // walk of the whole class each time made a class of many such calls quadratic
        return scheduledByCallOf.computeIfAbsent(owner, Tracer::scheduledByCallIn);
    }

    private final Map<TypeDeclaration<?>, Set<MethodDeclaration>> scheduledByCallOf = new IdentityHashMap<>();

    private static Set<MethodDeclaration> scheduledByCallIn(TypeDeclaration<?> owner) {
        Set<MethodDeclaration> out = new HashSet<>();
        for (MethodCallExpr call :
                owner.findAll(MethodCallExpr.class, x -> x.getNameAsString().startsWith("schedule"))) {
            for (Expression a : call.getArguments()) {
                String target = a instanceof MethodReferenceExpr r && r.getScope() instanceof ThisExpr
                        ? r.getIdentifier()
                        : a instanceof LambdaExpr l
                                        && l.getParameters().isEmpty()
                                        && l.getExpressionBody().orElse(null) instanceof MethodCallExpr m
                                        && (m.getScope().isEmpty()
                                                || m.getScope().get() instanceof ThisExpr)
                                ? m.getNameAsString()
                                : null;
                if (target != null) {
                    out.addAll(owner.getMethodsByName(target));
                }
            }
        }
        return out;
    }

    /** {@code m} reads {@code field}, itself or through a method of its class it calls on {@code this}. */
    private static boolean drains(TypeDeclaration<?> owner, MethodDeclaration m, String field, int depth) {
        if (m.getBody().isEmpty() || depth > 2) {
            return false;
        }
        Node body = m.getBody().get();
        if (!body.findAll(NameExpr.class, x -> x.getNameAsString().equals(field))
                        .isEmpty()
                || !body.findAll(FieldAccessExpr.class, x -> x.getNameAsString().equals(field))
                        .isEmpty()) {
            return true;
        }
        for (MethodCallExpr call : body.findAll(
                MethodCallExpr.class,
                x -> x.getScope().isEmpty() || x.getScope().get() instanceof ThisExpr)) {
            for (MethodDeclaration callee : owner.getMethodsByName(call.getNameAsString())) {
                if (callee != m && drains(owner, callee, field, depth + 1)) {
                    return true;
                }
            }
        }
        return false;
    }

    private static final Set<String> BUFFER_WRITES = Set.of(
            "merge",
            "put",
            "putAll",
            "add",
            "addAll",
            "offer",
            "compute",
            "computeIfAbsent",
            "computeIfPresent",
            "push");

    /** {@code WorkflowClient.start(…)}: the type a static call is made on. */
    private static String staticOwner(MethodCallExpr c) {
        return c.getScope()
                .filter(s -> s instanceof NameExpr n
                        && Character.isUpperCase(n.getNameAsString().charAt(0)))
                .map(Object::toString)
                .orElse(null);
    }

    /** {@code getX() + d}, {@code getX() - d}, {@code getX().add(d)}: a setter argument that moves X relative to itself. */
    private static boolean isDelta(Expression arg, String field, String receiver) {
        boolean arithmetic = arg instanceof BinaryExpr b
                        && (b.getOperator() == BinaryExpr.Operator.PLUS || b.getOperator() == BinaryExpr.Operator.MINUS)
                || arg instanceof MethodCallExpr m && m.getNameAsString().matches("add|subtract|plus|minus");
        // the value read back from the object it is set on: dto.setTimestamp("" + clock.getTimestamp()) is not a delta
        return arithmetic
                && !arg.findAll(
                                MethodCallExpr.class,
                                g -> g.getNameAsString().equals("get" + field)
                                        && g.getScope()
                                                .map(Object::toString)
                                                .orElse("")
                                                .equals(receiver))
                        .isEmpty();
    }

    /** The text of the method being walked, printed once per frame: the idempotency-key and header checks read it. */
    private static String memberText(Frame f) {
        if (f.memberText == null) {
            f.memberText = f.method == null ? "" : Repo.printed(f.method);
        }
        return f.memberText;
    }

    private boolean http(MethodCallExpr c, String name, String stype, String scopeText, Frame f) {
        String feignText = "";
        // a PUT replaces the resource its address names with the body it carries: a repeat writes the same again
        boolean putOnly = true;
        boolean write = false;
        boolean remote = false;
        boolean noTimeout = false;
        String kind = null;
        String apacheVerb = null;
        List<String> feignNames = new ArrayList<>();
        Built built = new Built(memberText(f), List.of(), null);
        if (stype != null && REST.contains(stype)) {
            remote = true;
            kind = "RestTemplate";
            // exchange/execute say their verb in an argument (HttpMethod.POST), or in the RequestEntity they are
            // given, built in the same method (RequestEntity.post(uri).body(…))
            String said = name.matches("exchange|execute")
                    ? c.toString() + (c.getArguments().size() <= 2 ? requestEntityVerb(memberText(f)) : "")
                    : "";
            write = name.matches("postFor\\w+|put|patchForObject")
                    || said.matches("(?s).*HttpMethod\\.(POST|PUT|PATCH).*");
            putOnly = name.equals("put")
                    || said.matches("(?s).*HttpMethod\\.PUT.*") && !said.matches("(?s).*HttpMethod\\.(POST|PATCH).*");
            noTimeout = true;
        } else if ((name.matches("post|put|patch") && c.getArguments().isEmpty()
                        || name.equals("method")
                                && c.getArguments().size() == 1
                                && c.getArgument(0).toString().matches("(HttpMethod\\.)?(POST|PUT|PATCH)"))
                && (stype != null && FLUENT_HTTP.contains(stype)
                        || scopeText.matches("(?i).*(webclient|restclient).*"))) {
            // WebClient/RestClient: post(), or method(HttpMethod.POST)
            remote = true;
            write = true;
            putOnly = name.equals("put") || c.toString().contains("PUT");
            kind = stype == null ? "WebClient" : stype;
            noTimeout = true;
        } else if (jaxRsWrite(c, name)) {
            // a JAX-RS client: target(url).request().post(Entity.json(body)), or method("POST", entity)
            remote = true;
            write = true;
            putOnly = name.equals("put") || c.toString().contains("\"PUT\"");
            kind = "JAX-RS client";
        } else if (name.matches("exchange|retrieve")
                && imports(c, "io.micronaut.http")
                && (c.toString() + memberText(f)).matches("(?s).*HttpRequest\\s*\\.\\s*(POST|PUT|PATCH)\\s*\\(.*")) {
            // Micronaut's HttpClient (or its toBlocking()) given HttpRequest.POST(uri, body)
            remote = true;
            write = true;
            putOnly = !(c.toString() + memberText(f)).matches("(?s).*HttpRequest\\s*\\.\\s*(POST|PATCH)\\s*\\(.*");
            kind = "Micronaut HttpClient";
        } else if ((name.equals("send") || name.equals("sendAsync")) && "HttpClient".equals(stype)) {
            remote = true;
            kind = "HttpClient";
            built = built(f, c.getArguments().isEmpty() ? null : c.getArgument(0));
            // the verb given as a value (.method(verb, body)): a write unless it is written out as a read
            boolean asValue = JDK_VERB_AS_VALUE.matcher(built.text).find();
            write = built.text.contains(".POST(") || built.text.contains(".PUT(") || asValue;
            putOnly = !built.text.contains(".POST(")
                    && !(asValue && !JDK_PUT_AS_VALUE.matcher(built.text).find());
            noTimeout = !built.text.contains(".timeout(");
        } else if (name.equals("execute") && scopeText.contains("newCall(")) {
            remote = true;
            kind = "OkHttp";
            built = built(
                    f,
                    c.getScope()
                            .filter(s -> s instanceof MethodCallExpr n
                                    && n.getNameAsString().equals("newCall")
                                    && n.getArguments().size() == 1)
                            .map(s -> ((MethodCallExpr) s).getArgument(0))
                            .orElse(null));
            write = built.text.contains(".post(") || built.text.contains(".put(");
            putOnly = !built.text.contains(".post(");
        } else if (name.equals("execute") && stype != null && APACHE_HTTP.contains(stype)) {
            // Apache HttpClient: the request object says the verb (new HttpPost(…), a builder's post(…)), or its
            // type does when a factory of the repository made it (HttpPost send(…) { return new HttpPost(…); })
            remote = true;
            kind = "Apache HttpClient";
            String request = c.getArguments().isEmpty() ? null : requestType(c.getArgument(0), f);
            boolean typed = request != null && request.matches("Http(Post|Put|Patch)");
            boolean reads = request != null && request.matches("Http(Get|Head|Options|Delete|Trace)");
            write = typed || !reads && APACHE_WRITE.matcher(memberText(f)).matches();
            putOnly = typed && request.equals("HttpPut");
            apacheVerb = typed ? request.substring(4).toUpperCase(Locale.ROOT) : null;
        } else if (stype != null && feign(stype)) {
            for (MethodDeclaration fm :
                    repo.methods(stype, name, c.getArguments().size())) {
                remote = true;
                boolean declaredFeign =
                        repo.types(stype).stream().anyMatch(t -> Types.annotated(t.getAnnotations(), "FeignClient"));
                kind = (declaredFeign ? "Feign " : "HTTP interface ") + stype;
                String anns = fm.getAnnotations().toString();
                write |= anns.matches("(?s).*(PostMapping|PutMapping|PatchMapping|RequestMethod\\.(POST|PUT|PATCH)"
                        + "|@(POST|PUT|PATCH)\\b|(Post|Put|Patch)Exchange|RequestLine\\(\"(POST|PUT|PATCH)).*");
                putOnly &= anns.matches(
                        "(?s).*(PutMapping|RequestMethod\\.PUT|@PUT\\b|PutExchange|RequestLine\\(\"PUT).*");
                feignText += fm.toString();
                feignNames.add(fm.getNameAsString() + " " + fm.getAnnotations());
            }
        }
        if (!remote) {
            return false;
        }
        if (write && !putOnly && searches(c, f, built.names.isEmpty() ? feignNames : built.names)) {
            // a POST whose address or method says it searches carries a query too long or structured for a GET: a read
            write = false;
        }
        add(Event.Kind.REMOTE, c, f, null, null, kind + " " + shortText(c));
        if (noTimeout && !timeoutsConfigured.getOrDefault(entry.source.module(), false)) {
            add(Event.Kind.SLOW, c, f, null, null, kind + " built without timeouts in this module");
        }
        if (write) {
            String context = c.toString() + " "
                    + String.join(" ", f.path.stream().map(Step::name).toList());
            Blast b = MONEY.matcher(context).matches()
                    ? Blast.MONEY
                    : NOTIFY.matcher(context).matches() ? Blast.NOTIFICATION : Blast.DATA;
            String verb = apacheVerb != null
                    ? apacheVerb
                    : kind.equals("HttpClient") || kind.equals("OkHttp") || kind.equals("Apache HttpClient")
                            ? (built.text.contains(".PUT(") || built.text.contains(".put(") ? "PUT" : "POST")
                            : name.matches("exchange|execute|method")
                                    ? saidVerb(c.toString() + requestEntityVerb(memberText(f)))
                                    : name.toUpperCase(Locale.ROOT);
            effect(
                    c,
                    f,
                    b,
                    Event.Category.EXTERNAL,
                    "calls " + kind + " " + verb + " (" + shortText(c) + ")",
                    putOnly || keyed(c.toString(), built.text + feignText),
                    built.site == null ? null : repo.loc(built.site));
        }
        return true;
    }

    /**
     * A word that names a read: search, query, find, lookup, as a word of an address ({@code /patients/search}) or of a
     * camel-case name ({@code searchUrl}, {@code findByNhsNumber}), not inside another word ({@code elasticsearch},
     * {@code findings}).
     */
    private static final Pattern SEARCH_WORD = Pattern.compile(
            "(?:(?<![A-Za-z])[sS]|(?<=[a-z0-9])S)earch(?![a-z])|(?:(?<![A-Za-z])[qQ]|(?<=[a-z0-9])Q)uer(?:y|ies)(?![a-z])"
                    + "|(?:(?<![A-Za-z])[fF]|(?<=[a-z0-9])F)ind(?![a-z])"
                    + "|(?:(?<![A-Za-z])[lL]|(?<=[a-z0-9])L)ook-?[uU]p(?![a-z])");

    /**
     * Where a request a client sends was built: the text of the methods that say its verb, and the names of those
     * the request was passed out of. A project's client often builds each endpoint's request in its own method
     * ({@code .POST(…)} in {@code submitMessage}, {@code .GET()} in {@code profileOf}) and hands it to one helper that
     * sends it ({@code call(HttpRequest request)}): read in the helper alone, the verb is nowhere. When the request
     * is a parameter of the frame's method, it is followed out through the call sites that led here, on this path
     * only (the GET a sibling endpoint passes to the same helper is another path), while it stays a parameter.
     * {@code site} is the call that handed the request out of the method that built it (null when this frame built
     * it): the effect is located there, each endpoint's own, not on the one line the helper sends every request from.
     */
    private record Built(String text, List<String> names, Node site) {}

    private static Built built(Frame f, Expression request) {
        StringBuilder text = new StringBuilder(memberText(f));
        List<String> names = new ArrayList<>();
        MethodDeclaration m = f.method;
        Expression r = request;
        Node handed = null;
        for (int s = f.sites.size() - 1; s >= 0 && m != null && r instanceof NameExpr n; s--) {
            int i = parameterIndex(m, n.getNameAsString());
            if (i < 0
                    || !(f.sites.get(s) instanceof MethodCallExpr site)
                    || site.getArguments().size() != m.getParameters().size()) {
                break;
            }
            if (names.isEmpty()) {
                names.add(m.getNameAsString());
            }
            m = Types.ancestor(site, MethodDeclaration.class).orElse(null);
            r = site.getArgument(i);
            handed = site;
            if (m != null) {
                text.append(' ').append(Repo.printed(m));
                names.add(m.getNameAsString());
            }
        }
        // a request a helper of the same class builds and returns (HttpRequest request = build(hook)): read there too
        Expression from = r;
        if (m != null && r instanceof NameExpr v) {
            from = m.findAll(com.github.javaparser.ast.body.VariableDeclarator.class).stream()
                    .filter(d -> d.getNameAsString().equals(v.getNameAsString()))
                    .map(d -> d.getInitializer().orElse(null))
                    .filter(java.util.Objects::nonNull)
                    .findFirst()
                    .orElse(null);
        }
        if (m != null
                && from instanceof MethodCallExpr helper
                && helper.getScope()
                        .filter(x -> !(x instanceof com.github.javaparser.ast.expr.ThisExpr))
                        .isEmpty()) {
            TypeDeclaration<?> owner = Types.enclosingType(m);
            if (owner != null) {
                for (MethodDeclaration b : owner.getMethodsByName(helper.getNameAsString())) {
                    if (b != m
                            && b.getParameters().size() == helper.getArguments().size()) {
                        text.append(' ').append(Repo.printed(b));
                    }
                }
            }
        }
        return new Built(text.toString(), names, handed);
    }

    private static int parameterIndex(MethodDeclaration m, String name) {
        for (int i = 0; i < m.getParameters().size(); i++) {
            if (m.getParameter(i).getNameAsString().equals(name)) {
                return i;
            }
        }
        return -1;
    }

    /**
     * A POST that reads: its address (the call's first argument, a {@code uri(…)}/{@code url(…)} in its statement),
     * the declared client method's name or mapping, or the name of the method sending it says search, query, find or
     * lookup. Such endpoints take a POST for a body-borne query and change nothing.
     */
    private static boolean searches(MethodCallExpr c, Frame f, List<String> feignNames) {
        List<String> said = new ArrayList<>(feignNames);
        if (f.method != null) {
            said.add(f.method.getNameAsString());
        }
        if (!c.getArguments().isEmpty()) {
            said.add(c.getArgument(0).toString());
        }
        Types.ancestor(c, Statement.class)
                .ifPresent(st -> st.findAll(
                                MethodCallExpr.class,
                                u -> u.getNameAsString().matches("uri|url|path|target")
                                        && !u.getArguments().isEmpty())
                        .forEach(u -> said.add(u.getArgument(0).toString())));
        return said.stream().anyMatch(x -> SEARCH_WORD.matcher(x).find())
                || Stream.concat(
                                feignNames.stream().map(n -> n.split(" ", 2)[0]),
                                Stream.ofNullable(f.method).map(MethodDeclaration::getNameAsString))
                        .anyMatch(n -> READ_NAME.matcher(n).matches()
                                && !WRITE_IN_NAME.matcher(n).find());
    }

    /**
     * A method named for what it reads ({@code getProfile}, {@code fetchPreferences}, {@code retrieveToken}): a POST
     * built there carries a lookup key in its body (a fiscal code kept out of URLs and logs), not a write.
     */
    private static final Pattern READ_NAME =
            Pattern.compile("(get|fetch|find|load|read|retrieve|lookup|query|search)[A-Z0-9]\\w*");
    /** ...unless the name also says it writes: {@code getOrCreateInbox}, {@code fetchAndStore}. */
    private static final Pattern WRITE_IN_NAME = Pattern.compile(
            "(Or|And|Then)[A-Z]|Create|Save|Store|Submit|Send|Register|Update|Insert|Post|Put|Add|Delete|Remove|Upsert|Set[A-Z]");

    /**
     * The static type of a request handed to a client: as {@link Types#typeOf} says, or for a {@code var} the type
     * of what initialised it ({@code var request = requests.send(…)}: the factory's declared return type).
     */
    private String requestType(Expression arg, Frame f) {
        String t = types.typeOf(arg);
        if (t != null && !t.equals("var") || !(arg instanceof NameExpr n) || f.method == null) {
            return t;
        }
        return f
                .method
                .findAll(VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))
                .stream()
                .filter(v -> v.getType().asString().equals("var"))
                .findFirst()
                .flatMap(VariableDeclarator::getInitializer)
                .map(types::typeOf)
                .orElse(null);
    }

    /** The verb an argument names ({@code HttpMethod.POST}), POST when none does. */
    private static String saidVerb(String text) {
        java.util.regex.Matcher m =
                Pattern.compile("HttpMethod\\.(POST|PUT|PATCH)").matcher(text);
        return m.find() ? m.group(1) : "POST";
    }

    /** The verb of a {@code RequestEntity} the method builds ({@code RequestEntity.post(uri)}), as HttpMethod.X. */
    private static String requestEntityVerb(String member) {
        java.util.regex.Matcher m = Pattern.compile("RequestEntity\\s*\\.\\s*(post|put|patch)\\s*\\(")
                .matcher(member);
        return m.find() ? " HttpMethod." + m.group(1).toUpperCase(Locale.ROOT) : "";
    }

    /**
     * A JAX-RS client write: {@code post(…)}/{@code put(…)} given an {@code Entity}, or {@code method("POST", …)}, in
     * a file that imports the JAX-RS client API ({@code javax.ws.rs.client}, {@code jakarta.ws.rs.client}).
     */
    private static boolean jaxRsWrite(MethodCallExpr c, String name) {
        if (c.getScope().isEmpty() || !(imports(c, "javax.ws.rs.client") || imports(c, "jakarta.ws.rs.client"))) {
            return false;
        }
        if (name.matches("post|put") && !c.getArguments().isEmpty()) {
            return c.getArgument(0).toString().matches("(?s)Entity\\s*\\.\\s*\\w+\\(.*")
                    || c.getScope().get().toString().matches("(?s).*\\.request\\(.*");
        }
        return name.equals("method")
                && c.getArguments().size() >= 2
                && c.getArgument(0).toString().matches("\"(POST|PUT|PATCH)\"|HttpMethod\\.(POST|PUT|PATCH)");
    }

    private boolean feign(String type) {
        for (TypeDeclaration<?> t : repo.types(type)) {
            if (Types.annotated(t.getAnnotations(), "FeignClient", "HttpExchange", "RegisterRestClient")) {
                return true;
            }
            // an HTTP client declared by its methods' verb annotations (Retrofit, JAX-RS, @PostExchange, Feign's
            // @RequestLine): an interface with nothing in the repository implementing it, a proxy made at run time
            if (t instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration i
                    && i.isInterface()
                    && i.getMethods().stream()
                            .anyMatch(m -> m.getBody().isEmpty()
                                    && m.getAnnotations().stream()
                                            .anyMatch(a -> HTTP_VERB
                                                    .matcher(a.getNameAsString())
                                                    .matches()))
                    && i.getMethods().stream()
                            .allMatch(m -> repo
                                    .methods(
                                            type,
                                            m.getNameAsString(),
                                            m.getParameters().size())
                                    .stream()
                                    .noneMatch(x -> x.getBody().isPresent()))) {
                return true;
            }
        }
        return false;
    }

    private static final Pattern HTTP_VERB =
            Pattern.compile("GET|POST|PUT|PATCH|DELETE|HTTP|RequestLine|(Get|Post|Put|Patch|Delete)Exchange");

    private static boolean keyed(String call, String member) {
        return (call + member)
                .matches("(?s).*(?i)(idempotency[-_ ]?key|idempotencykey|setIdempotencyKey|Idempotency-Key).*");
    }

    private void save(MethodCallExpr c, String stype, Frame f) {
        if (f.counter || c.getArguments().isEmpty()) {
            return; // the delta set before the save is the effect
        }
        Expression arg = c.getArgument(0);
        boolean insert = arg instanceof ObjectCreationExpr
                || arg instanceof MethodCallExpr m && m.getNameAsString().equals("build");
        String entity = types.entityOfRepository(stype);
        String made = arg instanceof MethodCallExpr m && !insert ? madeByFactory(m) : null;
        if (made != null) {
            insert = true; // dao.save(fraHendelse(h)): a mapper of the repository that returns a new entity
            entity = entity == null ? made : entity;
        }
        if (entity == null && arg instanceof ObjectCreationExpr oc) {
            entity = oc.getType().getNameAsString(); // entityManager.persist(new ConsumedMessage(id))
        }
        if (arg instanceof NameExpr n && f.method != null) {
            for (VariableDeclarator d : f.method.findAll(
                    VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))) {
                insert |= d.getInitializer()
                        .map(i -> i instanceof ObjectCreationExpr
                                || i instanceof MethodCallExpr m
                                        && (m.getNameAsString().equals("build")
                                                || m.getNameAsString().startsWith("from")
                                                || m.getNameAsString().startsWith("to")
                                                || m.getNameAsString().startsWith("new")
                                                || m.getNameAsString().startsWith("create")
                                                || m.getNameAsString().startsWith("map")))
                        .orElse(false);
                if (entity == null) {
                    entity = Types.simple(d.getType());
                }
            }
        }
        boolean fromMessage = false;
        if (!insert && arg instanceof NameExpr n) {
            // an entity read from the message (deserialized, or the handler's payload) whose @Id the database
            // generates: the save cannot find the row a previous delivery made, so it inserts another
            com.github.javaparser.ast.type.Type t = types.declaredType(n, n.getNameAsString());
            String name = t == null ? null : Types.simple(t);
            fromMessage = name != null && payloadTypes.contains(name) && generatedId(name);
            insert = fromMessage;
            if (fromMessage && entity == null) {
                entity = name;
            }
        }
        MethodCallExpr lookup = !insert && arg instanceof NameExpr n && f.method != null && entity != null
                ? findOrCreate(n, f.method, entity)
                : null;
        if (lookup != null) {
            List<String> properties = lookupProperties(lookup.getNameAsString());
            if (schema.uniqueProperties(entity, properties).equals(Optional.of(false))) {
                // find-or-create: the save inserts when the lookup found nothing, and nothing unique stops a second
                // delivery that looked at the same moment from inserting its own row
                add(Event.Kind.CHECK, lookup, f, null, null, lookup.toString());
                effect(
                        c,
                        f,
                        Blast.DATA,
                        Event.Category.DATABASE,
                        "inserts a " + entity + " when " + lookup.getNameAsString() + " finds none, with no unique"
                                + " constraint or index on " + String.join(", ", properties),
                        false);
                return;
            }
        }
        if (!insert || !fromMessage && entity != null && keyedByAssignedId(entity, arg, f)) {
            // an update of a row it loaded, or a save by an @Id the code assigns from what it was given: a repeat
            // writes the same row again, no duplicate; still a write to the database, which a publish after it
            // is not atomic with
            effect(
                    c,
                    f,
                    Blast.DATA,
                    Event.Category.DATABASE,
                    "writes " + (entity == null ? "a row" : "a " + entity) + " in place",
                    true);
            return;
        }
        String table = entity == null ? null : schema.tableOfEntity(entity).orElse(entity);
        Optional<Boolean> key = table == null ? Optional.empty() : schema.hasBusinessKey(table);
        if (table != null && freshKey("", created(arg, f)) && !schema.hasKeyBesidesId(table)) {
            freshInsert(c, f, table);
            return;
        }
        // a fresh random id is a new row each time (above); an id taken from the message is merged by save
        if (mergedBySave(c, stype, entity)) {
            if (table != null && DEDUPE_TABLE.matcher(table).matches()) {
                // a processed-events row all the same: when it commits before the work, a redelivery finds it
                add(Event.Kind.MARK, c, f, null, null, "saves the " + entity + " dedupe record");
            }
            // a row a repeat overwrites rather than fails on: neither a claim nor a guarded insert
            effect(
                    c,
                    f,
                    Blast.DATA,
                    Event.Category.DATABASE,
                    "merges a " + entity + " by the id it assigns (save of an entity Spring Data takes for existing)",
                    true);
            return;
        }
        if (table != null && DEDUPE_TABLE.matcher(table).matches() && key.orElse(true)) {
            add(Event.Kind.CLAIM, c, f, null, null, "insert into " + table + " under its unique key");
        } else if (key.orElse(false)) {
            add(Event.Kind.GUARD, c, f, null, null, "insert under a unique business key (" + table + ")");
        } else if (key.isEmpty() && entity != null && !types.isRepoType(entity) && checkedBefore()) {
            // an entity declared in a jar (a shared entity model) whose table no schema of the repository holds,
            // inserted after an exists-check: its keys live with it, out of sight, and the check says what they
            // are; "no unique business key" would be a guess
            add(Event.Kind.GUARD, c, f, null, null, "insert of a " + entity + " under keys kept in a jar");
        } else {
            effect(
                    c,
                    f,
                    table != null && MONEY_TABLE.matcher(table).matches() ? Blast.MONEY : Blast.DATA,
                    Event.Category.DATABASE,
                    fromMessage
                            ? "saves the " + entity
                                    + " read from the message, whose @Id is generated: each delivery inserts a new row"
                            : "inserts " + (entity == null ? "a row" : "a " + entity) + " with no unique business key",
                    false);
        }
    }

    private static final Pattern FIND_BY = Pattern.compile("(?:find|get|fetch|load|query)(?:First|One)?By([A-Z]\\w*)");

    /**
     * Find-or-create: the saved variable is made afresh ({@code x = new T()}) on one arm and comes from a lookup by
     * other columns than the id ({@code Optional<T> found = repo.findByQid(q)}, or {@code findByQid(q).orElseGet(() ->
     * new T())}) on the other. Returns that lookup, or null.
     */
    private MethodCallExpr findOrCreate(NameExpr n, MethodDeclaration m, String entity) {
        String name = n.getNameAsString();
        boolean created = false;
        MethodCallExpr lookup = null;
        for (AssignExpr a : m.findAll(AssignExpr.class)) {
            if (a.getTarget() instanceof NameExpr t && t.getNameAsString().equals(name)) {
                created |= a.getValue() instanceof ObjectCreationExpr oc
                        && oc.getType().getNameAsString().equals(entity);
            }
        }
        for (VariableDeclarator d : m.findAll(VariableDeclarator.class)) {
            Expression init = d.getInitializer().orElse(null);
            if (!(init instanceof MethodCallExpr call)) {
                continue;
            }
            if (d.getNameAsString().equals(name)
                    && call.getNameAsString().matches("orElseGet|orElse")
                    && call.getArguments().stream()
                            .anyMatch(x -> x.findFirst(
                                            ObjectCreationExpr.class,
                                            oc -> oc.getType().getNameAsString().equals(entity))
                                    .isPresent())
                    && call.getScope().orElse(null) instanceof MethodCallExpr found
                    && byColumns(found)) {
                return found;
            }
            if (d.getType().asString().startsWith("Optional") && byColumns(call)) {
                lookup = call;
            }
        }
        return created ? lookup : null;
    }

    private static boolean byColumns(MethodCallExpr call) {
        Matcher by = FIND_BY.matcher(call.getNameAsString());
        return by.matches() && !by.group(1).matches("Ids?|IdAnd\\w*");
    }

    /** The properties a derived query names ({@code findByQidAndCaseId}: qid, caseId). */
    private static List<String> lookupProperties(String method) {
        Matcher by = FIND_BY.matcher(method);
        if (!by.matches()) {
            return List.of();
        }
        List<String> out = new ArrayList<>();
        for (String p : by.group(1)
                .replaceAll("(OrderBy\\w*|IgnoreCase|AllIgnoreCase)$", "")
                .split("And(?=[A-Z])")) {
            out.add(Character.toLowerCase(p.charAt(0)) + p.substring(1));
        }
        return out;
    }

    /** In a catch block: a failure record written apart on purpose, to outlive the rollback. */
    private static boolean inCatch(Node n) {
        return Types.ancestor(n, com.github.javaparser.ast.stmt.CatchClause.class)
                .isPresent();
    }

    /** An exists-check (or a lookup deciding an arm) came earlier on this entry's path. */
    private boolean checkedBefore() {
        return events.stream().anyMatch(e -> e.kind() == Event.Kind.CHECK || e.kind() == Event.Kind.LOOKUP);
    }

    /**
     * The type a factory of the repository makes afresh on every call ({@code static Innslag fraHendelse(Hendelse h)
     * { var x = new Innslag(); …; return x; }}, {@code return new Innslag(…)}), whatever the factory is called: a
     * method of this class, of a class it imports statically, or of a class named as the scope. Null when any of its
     * returns hands back something it did not create there (a row it loaded, a cached value).
     */
    private String madeByFactory(MethodCallExpr m) {
        String owner = null;
        Expression scope = m.getScope().orElse(null);
        if (scope == null) {
            String name = m.getNameAsString();
            owner = m.findCompilationUnit()
                    .flatMap(cu -> cu.getImports().stream()
                            .filter(i -> i.isStatic()
                                    && !i.isAsterisk()
                                    && i.getName().getIdentifier().equals(name))
                            .map(i -> i.getName()
                                    .getQualifier()
                                    .map(q -> q.getIdentifier())
                                    .orElse(null))
                            .filter(java.util.Objects::nonNull)
                            .findFirst())
                    .orElseGet(() -> Optional.ofNullable(Types.enclosingType(m))
                            .map(t -> t.getNameAsString())
                            .orElse(null));
        } else if (scope instanceof NameExpr n
                && Character.isUpperCase(n.getNameAsString().charAt(0))) {
            owner = n.getNameAsString();
        }
        if (owner == null) {
            return null;
        }
        for (MethodDeclaration md :
                repo.methods(owner, m.getNameAsString(), m.getArguments().size(), m)) {
            List<ReturnStmt> returns = md.findAll(ReturnStmt.class);
            String made = null;
            for (ReturnStmt r : returns) {
                Expression e = r.getExpression().orElse(null);
                if (e instanceof NameExpr local) {
                    e = md
                            .findAll(
                                    VariableDeclarator.class,
                                    v -> v.getNameAsString().equals(local.getNameAsString()))
                            .stream()
                            .findFirst()
                            .flatMap(VariableDeclarator::getInitializer)
                            .orElse(null);
                }
                if (!(e instanceof ObjectCreationExpr oc)) {
                    made = null;
                    break;
                }
                made = oc.getType().getNameAsString();
            }
            if (made != null) {
                return made;
            }
        }
        return null;
    }

    private static final Pattern RECEIVE =
            Pattern.compile("(?s).*\\b(receiveMessage|poll|receive|fetch|nextMessage|basicGet)\\(.*");

    /** The call is a statement of a loop's block that comes before the block's receive, with no receive before it. */
    private static boolean beforeReceive(MethodCallExpr c) {
        Node stmt = c.getParentNode().orElse(null);
        if (!(stmt instanceof ExpressionStmt) || !(stmt.getParentNode().orElse(null) instanceof BlockStmt block)) {
            return false;
        }
        if (!(block.getParentNode().orElse(null) instanceof WhileStmt
                || block.getParentNode().orElse(null) instanceof com.github.javaparser.ast.stmt.ForStmt
                || block.getParentNode().orElse(null) instanceof com.github.javaparser.ast.stmt.DoStmt)) {
            return false;
        }
        int at = block.getStatements().indexOf((com.github.javaparser.ast.stmt.Statement) stmt);
        boolean before = block.getStatements().subList(0, at).stream()
                .anyMatch(x -> RECEIVE.matcher(x.toString()).matches());
        boolean after = block
                .getStatements()
                .subList(at + 1, block.getStatements().size())
                .stream()
                .anyMatch(x -> RECEIVE.matcher(x.toString()).matches());
        return after && !before;
    }

    /** A value made afresh on every run: a random UUID, the clock, a sequence. */
    private static final Pattern FRESH = Pattern.compile(
            "(?s).*(randomUUID\\(|gen_random_uuid|uuid_generate|nextval\\(|UUIDs?\\.timeBased|ObjectId\\(\\)|new ObjectId\\(\\)).*");

    /**
     * The insert's key is made afresh per delivery: its SQL or its bound values (a node: the call, or
     * the entity's construction) hold a random UUID or a sequence. A unique key on such a column rejects
     * nothing, so the row is an ordinary insert (an audit or history line), never a claim.
     */
    private static boolean freshKey(String sql, Node values) {
        return FRESH.matcher(sql).matches()
                || values != null && FRESH.matcher(values.toString()).matches();
    }

    /** The expression that builds the saved entity: the argument itself, or the local it was initialized with. */
    private static Node created(Expression arg, Frame f) {
        if (arg instanceof NameExpr n && f.method != null) {
            return f
                    .method
                    .findAll(VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))
                    .stream()
                    .findFirst()
                    .flatMap(VariableDeclarator::getInitializer)
                    .map(Node.class::cast)
                    .orElse(null);
        }
        return arg;
    }

    private void freshInsert(Node at, Frame f, String table) {
        effect(
                at,
                f,
                MONEY_TABLE.matcher(table).matches() ? Blast.MONEY : Blast.DATA,
                Event.Category.DATABASE,
                "inserts into " + table + " under a fresh random key (an ordinary row, not a claim: each delivery"
                        + " adds one)",
                false);
    }

    /** Assigns the id: {@code setId(x)}, {@code id(x)} on a builder, {@code this.id = x} or {@code id = x}. */
    private static final Pattern ID_ASSIGNMENT =
            Pattern.compile("(?s).*(\\.setId\\(|\\bsetId\\(|\\.id\\(|\\bid\\s*=[^=]).*");

    /**
     * A new entity whose {@code @Id} the code assigns (no {@code @GeneratedValue}, no fresh initializer)
     * from something stable: a builder's {@code .id(…)}, {@code setId(…)} on the local before the save, or
     * the entity's own static factory that sets it ({@code News.from(event)}). Spring Data, JPA's merge,
     * Elasticsearch, Mongo and Cassandra all save such an entity as a replace of the row or document with
     * that id, so a repeat changes nothing. An id made afresh ({@code UUID.randomUUID()}) is no key.
     */
    private boolean keyedByAssignedId(String entity, Expression arg, Frame f) {
        boolean assigned = false;
        for (TypeDeclaration<?> t : repo.types(entity)) {
            for (com.github.javaparser.ast.body.FieldDeclaration fd : t.getFields()) {
                if (fd.isAnnotationPresent("Id") || fd.isAnnotationPresent("PrimaryKey")) {
                    if (fd.isAnnotationPresent("GeneratedValue")
                            || FRESH.matcher(fd.toString()).matches()) {
                        return false;
                    }
                    assigned = true;
                }
            }
        }
        if (!assigned) {
            return false;
        }
        Node created = created(arg, f);
        List<String> setters = new ArrayList<>();
        if (created != null) {
            setters.add(created.toString());
        }
        if (arg instanceof NameExpr n && f.method != null) {
            f.method
                    .findAll(
                            MethodCallExpr.class,
                            c -> c.getNameAsString().equals("setId")
                                    && c.getScope()
                                            .map(x -> x.toString().equals(n.getNameAsString()))
                                            .orElse(false))
                    .forEach(c -> setters.add(c.toString()));
        }
        if (created instanceof MethodCallExpr factory
                && factory.getScope().map(x -> x.toString().equals(entity)).orElse(false)) {
            for (MethodDeclaration m : repo.methods(
                    entity, factory.getNameAsString(), factory.getArguments().size())) {
                m.getBody().ifPresent(b -> setters.add(b.toString()));
            }
        }
        return setters.stream()
                .anyMatch(x ->
                        ID_ASSIGNMENT.matcher(x).matches() && !FRESH.matcher(x).matches());
    }

    /**
     * A Spring Data repository's {@code save} of a JPA entity whose {@code @Id} the code assigns, with no
     * {@code @Version} and not {@code Persistable}: Spring Data takes it for an existing row and merges it (a select,
     * then an update or an insert), so a second delivery overwrites the first's row instead of failing on its key. It
     * claims nothing; {@code persist}/{@code insert}, a generated id, a version or {@code Persistable.isNew} do.
     */
    private boolean mergedBySave(MethodCallExpr c, String stype, String entity) {
        if (entity == null
                || !c.getNameAsString().matches("save|saveAndFlush|saveAll")
                || stype == null
                || !types.isSpringDataRepository(stype)) {
            return false;
        }
        for (TypeDeclaration<?> t : repo.types(entity)) {
            if (!t.isAnnotationPresent("Entity") || Repo.printed(t).matches("(?s).*\\bPersistable\\b.*")) {
                return false;
            }
            boolean assigned = false;
            for (com.github.javaparser.ast.body.FieldDeclaration fd : t.getFields()) {
                if (fd.isAnnotationPresent("Version") || fd.isAnnotationPresent("GeneratedValue")) {
                    return false;
                }
                assigned |= fd.isAnnotationPresent("Id") || fd.isAnnotationPresent("EmbeddedId");
            }
            return assigned;
        }
        return false;
    }

    /** The entity class declares its {@code @Id} with {@code @GeneratedValue}: the database picks a new one per insert. */
    private boolean generatedId(String entity) {
        for (TypeDeclaration<?> t : repo.types(entity)) {
            for (com.github.javaparser.ast.body.FieldDeclaration fd : t.getFields()) {
                if (fd.isAnnotationPresent("Id") && fd.isAnnotationPresent("GeneratedValue")) {
                    return true;
                }
                if (fd.isAnnotationPresent("Id") && mongoDocument(t) && mongoAssigned(t, fd)) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * A MongoDB document: {@code @Document}, or (the annotation being optional) a class whose {@code @Id} is Spring
     * Data's own ({@code org.springframework.data.annotation.Id}, not JPA's) in a module that uses MongoDB (its build
     * or configuration names it).
     */
    private boolean mongoDocument(TypeDeclaration<?> t) {
        if (t.isAnnotationPresent("Document")) {
            return true;
        }
        Repo.Source s = repo.sourceOf(t);
        if (s == null
                || s.cu().getImports().stream()
                        .noneMatch(i -> i.getNameAsString().equals("org.springframework.data.annotation.Id"))) {
            return false;
        }
        return mongoModules.computeIfAbsent(s.module(), m -> {
            for (Path f : repo.otherFiles) {
                String n = f.getFileName().toString();
                if (f.startsWith(m)
                        && (n.equals("pom.xml") || n.startsWith("build.gradle") || n.startsWith("application"))) {
                    try {
                        if (java.nio.file.Files.readString(f)
                                .toLowerCase(Locale.ROOT)
                                .contains("mongodb")) {
                            return true;
                        }
                    } catch (java.io.IOException | RuntimeException e) {
                        // an unreadable build or configuration file says nothing about the store
                    }
                }
            }
            return false;
        });
    }

    private final Map<Path, Boolean> mongoModules = new HashMap<>();

    /**
     * A MongoDB document's {@code @Id} (a String, ObjectId or BigInteger) that nothing in the repository sets: Spring
     * Data gives each save of a document with a null id a new ObjectId, so a document read from the message is
     * inserted again on every delivery. An id a constructor assigns, or that code naming the type sets, is the
     * producer's key: a save by it replaces the document.
     */
    private boolean mongoAssigned(TypeDeclaration<?> t, com.github.javaparser.ast.body.FieldDeclaration id) {
        String type = Types.simple(id.getElementType());
        if (!type.equals("String") && !type.equals("ObjectId") && !type.equals("BigInteger")) {
            return false;
        }
        String field = id.getVariable(0).getNameAsString();
        String setter = "set" + Character.toUpperCase(field.charAt(0)) + field.substring(1) + "(";
        boolean constructed = t.getConstructors().stream()
                .anyMatch(ctor -> ctor.findAll(AssignExpr.class).stream()
                        .anyMatch(a -> a.getTarget()
                                .toString()
                                .replaceFirst("^this\\.", "")
                                .equals(field)));
        if (constructed) {
            return false;
        }
        String name = t.getNameAsString();
        String own = t.findCompilationUnit()
                .flatMap(cu -> cu.getStorage())
                .map(st -> st.getPath().getFileName().toString())
                .orElse("");
        for (Repo.RawFile f : repo.rawFiles()) {
            if (!f.file().getFileName().toString().equals(own)
                    && f.text().contains(name)
                    && (f.text().contains("." + setter) || f.text().contains("." + field + "("))) {
                return false; // code naming the type sets its id (or builds it with one)
            }
        }
        return true;
    }

    private void assign(AssignExpr a, Frame f) {
        if ((a.getOperator() == AssignExpr.Operator.PLUS || a.getOperator() == AssignExpr.Operator.MINUS)
                && a.getTarget() instanceof FieldAccessExpr fa
                && !(fa.getScope() instanceof ThisExpr)) {
            f.counter = true;
            String field = fa.getNameAsString();
            String owner = Optional.ofNullable(types.typeOf(fa.getScope())).orElse("");
            effect(
                    a,
                    f,
                    MONEY.matcher(field + " " + owner).matches() ? Blast.MONEY : Blast.DATA,
                    Event.Category.DATABASE,
                    "moves " + field + " by a delta (" + a + ")",
                    false);
        }
    }

    private boolean isCheck(MethodCallExpr c, String name) {
        if (!CHECK.matcher(name).matches() && !storeMembership(c, name)) {
            // a list looked up by key under any read verb (getRecordRefsByEnvelopeId): a check only when its
            // emptiness picks the arm that writes
            if (LOOKUP_NAME.matcher(name).matches()
                    && c.getParentNode().orElse(null) instanceof VariableDeclarator d
                    && COLLECTION.matcher(d.getType().asString()).matches()) {
                lookupArm = actsWhenEmpty(d);
                return lookupArm != null;
            }
            return false;
        }
        if (name.matches("getStatus|getState|is[A-Z]\\w*") && !loadedFromStore(c)) {
            return false; // the message's own status, not state the consumer stored
        }
        for (Node n = c; n.getParentNode().isPresent(); n = n.getParentNode().get()) {
            Node p = n.getParentNode().get();
            if (p instanceof IfStmt i && i.getCondition() == n
                    || p instanceof ConditionalExpr ce && ce.getCondition() == n
                    || p instanceof WhileStmt) {
                return true;
            }
            if (p instanceof ReturnStmt) {
                // a predicate helper (alreadyHandled(e) { return repo.existsBy…(…); }, isNew(id) { return
                // !seen.exists(id); }): the caller's condition tests what it returns, so the check is made here,
                // in another method than the act it guards
                return Types.ancestor(p, MethodDeclaration.class)
                        .map(m -> m.getType().asString().matches("boolean|Boolean"))
                        .orElse(false);
            }
            if (p instanceof VariableDeclarator d) {
                String t = d.getType().asString();
                if (COLLECTION.matcher(t).matches() && !(statusRead(c) && testedLater(d))) {
                    lookupArm = actsWhenEmpty(d);
                    return lookupArm != null;
                }
                return t.equals("boolean")
                        || t.equals("Boolean")
                        || t.startsWith("Optional") && (statusRead(c) || !valueUsed(d))
                        || statusRead(c) && testedLater(d);
            }
            if (p instanceof com.github.javaparser.ast.stmt.Statement || p instanceof LambdaExpr) {
                return false;
            }
        }
        return false;
    }

    /**
     * A membership test on what a store returned ({@code redis.opsForHash().entries("mail_log").containsKey(id)},
     * {@code cache.keys(p).contains(id)}): the store is read, so the test asks whether the consumer recorded the key,
     * as {@code hasKey} does. A {@code containsKey} on a map the code built itself is not a check.
     */
    private static boolean storeMembership(MethodCallExpr c, String name) {
        if (!name.matches("containsKey|contains") || !(c.getScope().orElse(null) instanceof MethodCallExpr read)) {
            return false;
        }
        String text = read.toString().toLowerCase(Locale.ROOT);
        return read.getNameAsString().matches("entries|keys|members|smembers|hgetall|hkeys|get|getMap|getSet")
                && (text.contains("opsfor") || text.contains("redis") || text.contains("cache"));
    }

    /** Set by {@link #isCheck} when the check is a list lookup: the branch of the arm it guards. */
    private Long lookupArm;

    private static final Pattern LOOKUP_NAME =
            Pattern.compile("(get|search|fetch|query|lookup|list|load|find)\\w*By[A-Z]\\w*");

    private static final Pattern COLLECTION = Pattern.compile("(List|Set|Collection|Iterable|ArrayList|HashSet)(<.*)?");
    /** Calls that only report: an arm holding nothing else makes no write. */
    private static final Pattern LOGGING =
            Pattern.compile("trace|debug|info|warn|error|println|printf|format|get|isEmpty|size|of");

    /**
     * A list looked up by key ({@code getRecordsByEnvelopeId(id)}) whose emptiness picks the arm that writes: the
     * write happens only when nothing was found ({@code if (!found.isEmpty()) return found.get(0); else create()}),
     * so the lookup is a dedupe check of the effects on that arm (its branch id, see {@link #arms}; null when there is
     * none). A list whose emptiness only stops early, and whose items the rest of the method works on, asks nothing
     * about whether the event was seen.
     */
    private Long actsWhenEmpty(VariableDeclarator d) {
        String v = Pattern.quote(d.getNameAsString());
        Pattern empty = Pattern.compile("\\s*" + v + "\\.isEmpty\\(\\)|\\s*" + v + "\\.size\\(\\)\\s*==\\s*0");
        Pattern notEmpty =
                Pattern.compile("\\s*!\\s*" + v + "\\.isEmpty\\(\\)|\\s*" + v + "\\.size\\(\\)\\s*(>|!=)\\s*0");
        MethodDeclaration m = Types.ancestor(d, MethodDeclaration.class).orElse(null);
        if (m == null) {
            return null;
        }
        for (IfStmt i : m.findAll(IfStmt.class)) {
            String cond = i.getCondition().toString();
            List<Node> whenEmpty = new ArrayList<>();
            int arm = 0;
            if (empty.matcher(cond).matches()) {
                whenEmpty.add(i.getThenStmt());
            } else if (notEmpty.matcher(cond).matches() && endsAbruptly(i.getThenStmt())) {
                arm = 1;
                if (i.getElseStmt().isPresent()) {
                    whenEmpty.add(i.getElseStmt().get());
                } else if (i.getParentNode().orElse(null) instanceof BlockStmt b) {
                    // if (!found.isEmpty()) return …; then the rest of the block runs only when nothing was found
                    whenEmpty.addAll(b.getStatements()
                            .subList(
                                    b.getStatements().indexOf(i) + 1,
                                    b.getStatements().size()));
                }
            }
            if (whenEmpty.stream()
                    .flatMap(n -> n.findAll(MethodCallExpr.class).stream())
                    .anyMatch(c -> !LOGGING.matcher(c.getNameAsString()).matches())) {
                return branch(i, arm);
            }
        }
        return null;
    }

    /** The call's scope is a local variable loaded by a call (a repository or mapper read). */
    /**
     * A read constrained by a stored status: {@code findByIdAndStatus(…)}, or a criteria object built in
     * the same method with {@code andStatusEqualTo(…)}. Its result tested in an {@code if} is a check
     * whose act comes later, maybe in another method.
     */
    private static boolean statusRead(MethodCallExpr c) {
        if (STATUS_WORD.matcher(c.getNameAsString()).find()) {
            return true;
        }
        MethodDeclaration m = Types.ancestor(c, MethodDeclaration.class).orElse(null);
        if (m == null) {
            return false;
        }
        for (Expression a : c.getArguments()) {
            if (a instanceof NameExpr n) {
                String prefix = n.getNameAsString() + ".";
                if (m
                        .findAll(
                                MethodCallExpr.class,
                                x -> x.toString().startsWith(prefix)
                                        && STATUS_WORD.matcher(x.toString()).find())
                        .stream()
                        .findAny()
                        .isPresent()) {
                    return true;
                }
            }
        }
        return false;
    }

    private static final Pattern STATUS_WORD = Pattern.compile("Status|State|Processed");

    /**
     * The {@code Optional} declared by {@code d} is opened in its method ({@code get()}, {@code orElse…},
     * {@code ifPresent…}, {@code map}): the lookup loads the row the handler goes on to update or create, a
     * find-then-update that asks nothing about whether the event was seen, so it is not a dedupe check.
     */
    private static boolean valueUsed(VariableDeclarator d) {
        String v = d.getNameAsString();
        return Types.ancestor(d, MethodDeclaration.class)
                .map(m -> m.findAll(MethodCallExpr.class).stream()
                        .anyMatch(x -> x.getScope().orElse(null) instanceof NameExpr n
                                && n.getNameAsString().equals(v)
                                && OPTIONAL_OPEN.matcher(x.getNameAsString()).matches()))
                .orElse(false);
    }

    private static final Pattern OPTIONAL_OPEN =
            Pattern.compile("get|orElse|orElseGet|orElseThrow|ifPresent|ifPresentOrElse|map|flatMap|stream");

    /** The variable declared by {@code d} is tested in an {@code if} of its method. */
    private static boolean testedLater(VariableDeclarator d) {
        String v = d.getNameAsString();
        return Types.ancestor(d, MethodDeclaration.class)
                .map(m -> m.findAll(IfStmt.class).stream()
                        .anyMatch(i ->
                                i
                                        .getCondition()
                                        .findAll(
                                                NameExpr.class,
                                                x -> x.getNameAsString().equals(v))
                                        .stream()
                                        .findAny()
                                        .isPresent()))
                .orElse(false);
    }

    private static boolean loadedFromStore(MethodCallExpr c) {
        if (c.getScope().isEmpty() || !(c.getScope().get() instanceof NameExpr n)) {
            return false;
        }
        MethodDeclaration m = Types.ancestor(c, MethodDeclaration.class).orElse(null);
        if (m == null) {
            return false;
        }
        for (VariableDeclarator d :
                m.findAll(VariableDeclarator.class, v -> v.getNameAsString().equals(n.getNameAsString()))) {
            if (d.getInitializer().filter(i -> i instanceof MethodCallExpr).isPresent()) {
                return true;
            }
        }
        return false;
    }

    // ---- SQL --------------------------------------------------------------------------------------

    private static final Pattern SQL_CALLS = Pattern.compile(
            "update|batchUpdate|execute|executeUpdate|executeLargeUpdate|prepareStatement|query\\w*|insert|sql|createQuery"
                    + "|createNativeQuery|addBatch|executeQuery");
    private static final Pattern SQL_TEXT = Pattern.compile("(?is)\\s*(insert|update|merge|delete|select|with)\\b.*");

    private String sqlOf(MethodCallExpr c, String stype, String name) {
        if (stype != null) {
            Optional<String> mapped = schema.mapperSql(stype, name);
            if (mapped.isPresent()) {
                return mapped.get();
            }
        }
        if (!SQL_CALLS.matcher(name).matches()) {
            return null;
        }
        for (Expression a : c.getArguments()) {
            String s = constants.text(a, c);
            if (s != null && SQL_TEXT.matcher(s).matches()) {
                return s;
            }
        }
        return null;
    }

    /** {@code c} runs the SQL {@code raw}, which is written at {@code at} (the call, or the mapper method's annotation). */
    private void sql(MethodCallExpr c, Node at, String raw, Frame f) {
        String sql = raw.replaceAll("\\s+", " ").strip();
        String lower = sql.toLowerCase(Locale.ROOT);
        Matcher ins = INSERT.matcher(sql);
        if (ins.find()) {
            String table = Schema.table(ins.group(1));
            boolean conflict = lower.contains("on conflict") && lower.contains("do nothing")
                    || lower.startsWith("insert ignore")
                    || lower.contains("on duplicate key")
                    || lower.contains(" where not exists");
            Optional<Boolean> key = schema.hasBusinessKey(table);
            if (conflict && key.isPresent() && !key.get()) {
                // insert-if-absent with nothing unique behind it: ON CONFLICT / INSERT IGNORE never conflict, and
                // WHERE NOT EXISTS is a check-then-insert inside one statement that two concurrent transactions
                // both pass (neither sees the other's uncommitted row)
                add(
                        Event.Kind.WEAK,
                        at,
                        f,
                        null,
                        null,
                        "insert into " + table + " if absent ("
                                + (lower.contains(" where not exists") ? "WHERE NOT EXISTS" : "a conflict clause")
                                + ") with no unique key on the table besides its generated id: two concurrent"
                                + " deliveries both find no row, both insert and both go on as if first");
                return;
            }
            if (freshKey(sql, c) && !schema.hasKeyBesidesId(table)) {
                freshInsert(at, f, table);
                return;
            }
            if (DEDUPE_TABLE.matcher(table).matches() && (conflict || key.orElse(true))) {
                add(
                        Event.Kind.CLAIM,
                        at,
                        f,
                        null,
                        null,
                        "insert into " + table + (conflict ? " ON CONFLICT DO NOTHING" : " under its unique key"));
            } else if (conflict || key.orElse(false)) {
                add(Event.Kind.GUARD, at, f, null, null, "insert into " + table + " under a unique key");
            } else {
                effect(
                        at,
                        f,
                        MONEY_TABLE.matcher(table).matches() ? Blast.MONEY : Blast.DATA,
                        Event.Category.DATABASE,
                        "inserts into " + table
                                + (key.isPresent()
                                        ? ", which has no unique business key"
                                        : " with no unique key in sight"),
                        false);
            }
            return;
        }
        if (CYPHER_CREATE.matcher(sql).find()) {
            // Cypher: CREATE makes a new node or relationship on every run; MERGE would match the existing one
            effect(
                    at,
                    f,
                    Blast.DATA,
                    Event.Category.DATABASE,
                    "creates a graph node or relationship (Cypher CREATE, not MERGE)",
                    false);
            return;
        }
        Matcher upd = UPDATE.matcher(sql);
        if (upd.find()) {
            String table = Schema.table(upd.group(1));
            boolean checked = !(c.getParentNode().orElse(null) instanceof ExpressionStmt);
            boolean guarded = GUARD_WHERE.matcher(sql).find() && checked;
            Matcher counter = COUNTER_SQL.matcher(sql);
            if (guarded) {
                add(Event.Kind.GUARD, at, f, null, null, "guarded transition on " + table + " (count checked)");
            } else if (counter.find()) {
                String col = counter.group(1) != null ? counter.group(1) : counter.group(2);
                effect(
                        at,
                        f,
                        MONEY.matcher(col + " " + table).matches() ? Blast.MONEY : Blast.DATA,
                        Event.Category.DATABASE,
                        "moves " + (table.contains("?") ? "" : table + ".") + col + " by a delta",
                        false);
            }
        }
    }

    // ---- into the repository's own code -----------------------------------------------------------

    private void descend(MethodCallExpr c, String name, String stype, Optional<Expression> scope, Frame f) {
        boolean self = scope.isEmpty() || scope.get() instanceof ThisExpr;
        List<MethodDeclaration> targets;
        if (self) {
            targets = new ArrayList<>();
            // an inner class calls its outer class's methods without a scope too
            for (Node t = f.type;
                    t != null && targets.isEmpty();
                    t = t.getParentNode()
                            .flatMap(p -> Types.ancestor(p, TypeDeclaration.class)
                                    .map(Node.class::cast)
                                    .or(() -> p instanceof TypeDeclaration<?> ? Optional.of(p) : Optional.empty()))
                            .orElse(null)) {
                // read from the class itself: a copy of the class in another build module is not this one
                targets.addAll(repo.methods(
                        ((TypeDeclaration<?>) t).getNameAsString(),
                        name,
                        c.getArguments().size(),
                        t));
            }
            if (entry != null && entry.self != null) {
                // the abstract consumer's loop as one concrete subclass runs it: its overrides, not its siblings'
                Set<String> lineage = lineage(entry.self);
                List<MethodDeclaration> mine = targets.stream()
                        .filter(t -> lineage.contains(qualified(Types.enclosingType(t))))
                        .toList();
                if (!mine.isEmpty()) {
                    targets = new ArrayList<>(mine);
                }
            }
            if (targets.isEmpty()) {
                targets = staticallyImported(c, name);
            }
        } else if (stype != null && types.isRepoType(stype)) {
            targets = repo.methods(stype, name, c.getArguments().size(), c);
            if (targets.stream().noneMatch(m -> m.getBody().isPresent())) {
                beanLambdas(c, stype, f);
            }
        } else if (scope.get() instanceof NameExpr cls
                && Character.isUpperCase(cls.getNameAsString().charAt(0))
                && types.isRepoType(cls.getNameAsString())) {
            // a static method of a repository class (a utility building the poll's record handler)
            targets = statics(
                    repo.methods(cls.getNameAsString(), name, c.getArguments().size(), c));
        } else {
            return;
        }
        enter(c, targets, self, f);
    }

    /**
     * The repository's static methods a call without a scope reaches through a static import ({@code import static
     * …AsyncMigrationsConsumerUtils.pollAsyncMigrationsMessages}, or the class's {@code *}).
     */
    private List<MethodDeclaration> staticallyImported(MethodCallExpr c, String name) {
        List<MethodDeclaration> out = new ArrayList<>();
        for (com.github.javaparser.ast.ImportDeclaration imp :
                c.findCompilationUnit().map(cu -> cu.getImports()).orElse(new com.github.javaparser.ast.NodeList<>())) {
            if (!imp.isStatic()
                    || !imp.isAsterisk() && !imp.getName().getIdentifier().equals(name)) {
                continue;
            }
            String owner = (imp.isAsterisk()
                            ? Optional.of(imp.getName())
                            : imp.getName().getQualifier())
                    .map(q -> q.getIdentifier())
                    .orElse(null);
            if (owner != null && types.isRepoType(owner)) {
                out.addAll(statics(repo.methods(owner, name, c.getArguments().size(), c)));
            }
        }
        return out;
    }

    private static List<MethodDeclaration> statics(List<MethodDeclaration> ms) {
        return ms.stream().filter(MethodDeclaration::isStatic).toList();
    }

    /** The qualified names of {@code t} and of the repository classes it extends. */
    private Set<String> lineage(TypeDeclaration<?> t) {
        Set<String> out = new HashSet<>();
        java.util.ArrayDeque<TypeDeclaration<?>> todo = new java.util.ArrayDeque<>(List.of(t));
        while (!todo.isEmpty() && out.size() < 8) {
            TypeDeclaration<?> x = todo.pop();
            if (out.add(qualified(x)) && x instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration c) {
                c.getExtendedTypes().forEach(st -> todo.addAll(repo.types(st.getNameAsString(), x)));
            }
        }
        return out;
    }

    private static String qualified(TypeDeclaration<?> t) {
        return t == null ? "" : t.getFullyQualifiedName().orElse(t.getNameAsString());
    }

    /**
     * The repository's own interface implemented by a {@code @Bean} lambda ({@code @Bean Acknowledger
     * acker(Channel ch) { return tag -> ch.basicAck(tag, false); }}): a call through the interface runs
     * the lambda, so an acknowledgement or an effect wrapped this way is placed where it is called.
     */
    private void beanLambdas(MethodCallExpr c, String stype, Frame f) {
        if (f.depth >= MAX_DEPTH) {
            return;
        }
        for (MethodDeclaration bean : repo.beanFactories(stype)) {
            if (Visiting.contains(f.visiting, bean)) {
                continue;
            }
            for (ReturnStmt r : bean.findAll(ReturnStmt.class)) {
                if (r.getExpression().orElse(null) instanceof LambdaExpr l) {
                    List<Step> path = new ArrayList<>(f.path);
                    TypeDeclaration<?> owner = Types.enclosingType(bean);
                    path.add(new Step(
                            (owner == null ? "?" : owner.getNameAsString()) + "." + bean.getNameAsString()
                                    + " (lambda)",
                            repo.loc(c)));
                    Visiting visiting = Visiting.with(f.visiting, bean);
                    span(bean);
                    Frame callee = new Frame(f.depth + 1, List.copyOf(path), f.tx, f.txLoc, visiting, owner, bean);
                    callee.async = f.async;
                    callee.arms = arms(c, f);
                    callee.data = carried(c, l, l.getBody(), f);
                    visit(l.getBody(), callee);
                }
            }
        }
    }

    private void reference(MethodReferenceExpr r, Frame f) {
        if (r.getIdentifier().equals("ack") && "AcknowledgableDelivery".equals(referenceOwner(r))) {
            add(Event.Kind.ACK, r, f, null, null, Repo.printed(r));
            return;
        }
        String buffer = bufferReference(r);
        if (buffer != null) {
            addBuffer(r, f, buffer);
            return;
        }
        Expression scope = r.getScope();
        boolean self = scope instanceof ThisExpr;
        String type;
        if (self) {
            type = f.type == null ? null : f.type.getNameAsString();
        } else if (scope.isTypeExpr() && Character.isLowerCase(scope.toString().charAt(0))) {
            // service::apply parses as a type expression; a lower-case name is a variable or field
            type = Optional.ofNullable(types.declaredType(scope, scope.toString()))
                    .map(Types::simple)
                    .orElse(null);
        } else {
            type = scope.isTypeExpr() ? scope.toString() : types.typeOf(scope);
        }
        if (type == null || !types.isRepoType(type)) {
            return;
        }
        List<MethodDeclaration> targets = new ArrayList<>();
        for (TypeDeclaration<?> t : repo.types(type)) {
            targets.addAll(t.getMethodsByName(r.getIdentifier()));
        }
        enter(r, targets, self, f);
    }

    private void enter(Node at, List<MethodDeclaration> targets, boolean self, Frame f) {
        if (f.depth >= MAX_DEPTH) {
            return;
        }
        int followed = 0;
        // a method reached both as the class's own and through a subclass's lineage is walked once, not twice
        Set<MethodDeclaration> entered = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        // identity, not equals: a javaparser node's equals and hashCode walk its whole tree
        Set<TypeDeclaration<?>> owners = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        targets.stream()
                .filter(t -> t.getBody().isPresent())
                .map(Types::enclosingType)
                .forEach(owners::add);
        boolean dispatched = owners.size() > 1;
        if (dispatched) {
            targets = visible(targets);
        }
        for (MethodDeclaration t : targets) {
            if (t.getBody().isEmpty() || Visiting.contains(f.visiting, t) || !entered.add(t) || followed++ >= 4) {
                continue;
            }
            Integer tx = f.tx;
            Location txLoc = f.txLoc;
            if (Types.isTransactional(t)) {
                if (self && f.tx == null) {
                    add(
                            Event.Kind.SELF_INVOCATION,
                            at,
                            f,
                            null,
                            repo.loc(t),
                            Types.enclosingType(t).getNameAsString() + "." + t.getNameAsString());
                } else if (!self
                        && (f.tx == null || t.getAnnotations().toString().contains("REQUIRES_NEW"))) {
                    if (f.tx != null && !inCatch(at)) {
                        // a transaction of its own inside the open one: it commits first, whatever the outer does
                        add(
                                Event.Kind.NESTED,
                                at,
                                f,
                                null,
                                null,
                                Types.enclosingType(t).getNameAsString() + "." + t.getNameAsString());
                    }
                    tx = ++txIds;
                    txLoc = repo.loc(t);
                }
            }
            List<Step> path = new ArrayList<>(f.path);
            TypeDeclaration<?> owner = Types.enclosingType(t);
            path.add(new Step(
                    (owner == null ? "?" : owner.getNameAsString()) + "." + t.getNameAsString(), repo.loc(at)));
            Visiting visiting = Visiting.with(f.visiting, t);
            span(t);
            Frame callee = new Frame(f.depth + 1, List.copyOf(path), tx, txLoc, visiting, owner, t);
            callee.async = f.async;
            if (springAsync(at, t, owner, self, f)) {
                add(
                        Event.Kind.ASYNC,
                        at,
                        f,
                        null,
                        null,
                        shortText(at) + ", an @Async method " + owner.getNameAsString() + "." + t.getNameAsString());
                callee.async = repo.loc(at);
            }
            callee.arms = arms(at, f);
            if (dispatched) {
                // a call on an abstract method or an interface runs one of the overrides it resolves to: each is an arm
                List<Long> arms = new ArrayList<>(callee.arms);
                arms.add(branch(at, Math.min(followed, 250)));
                callee.arms = List.copyOf(arms);
            }
            callee.sites = append(f.sites, at);
            callee.data = carried(at, t, t.getBody().get(), f);
            callee.bound = bind(at, t, f);
            Quiet key = new Quiet(
                    t,
                    at,
                    callee.depth,
                    tx,
                    txLoc,
                    callee.async,
                    callee.data,
                    callee.bound,
                    checkedBefore(),
                    tempFiles.size());
            if (quiet.contains(key)) {
                continue;
            }
            int before = events.size();
            visit(t.getBody().get(), callee);
            if (events.size() == before) {
                quiet.add(key);
            }
        }
    }

    /**
     * A call already walked in this trace that recorded nothing, with everything its walk reads the same: the method,
     * the call site (a parameter is followed back through it), the depth (what the walk can still reach), the open
     * transaction, the hand-off, the names holding the message, the classes bound to parameters, and the trace's
     * state a walk consults (an earlier check, the temp files written). Walking it again records nothing again, and
     * in a repository whose calls fan out (Canal's adapters, each into the same getters from every path) those walks
     * were most of the trace: a quiet call is walked once per key.
     */
    private record Quiet(
            MethodDeclaration method,
            Node site,
            int depth,
            Integer tx,
            Location txLoc,
            Location async,
            Set<String> data,
            Map<String, String> bound,
            boolean checked,
            int tempFiles) {
        @Override
        public boolean equals(Object o) {
            // identity for the nodes: a javaparser node's equals and hashCode walk its whole tree
            return o instanceof Quiet q
                    && method == q.method
                    && site == q.site
                    && depth == q.depth
                    && java.util.Objects.equals(tx, q.tx)
                    && java.util.Objects.equals(txLoc, q.txLoc)
                    && java.util.Objects.equals(async, q.async)
                    && java.util.Objects.equals(data, q.data)
                    && bound.equals(q.bound)
                    && checked == q.checked
                    && tempFiles == q.tempFiles;
        }

        @Override
        public int hashCode() {
            return java.util.Objects.hash(
                    System.identityHashCode(method),
                    System.identityHashCode(site),
                    depth,
                    tx,
                    txLoc,
                    async,
                    data,
                    bound,
                    checked,
                    tempFiles);
        }
    }

    private final Set<Quiet> quiet = new HashSet<>();

    /** The static type of a call's receiver, or the class bound to it when it is a parameter the caller bound. */
    private String boundType(Expression scope, Frame f) {
        if (scope instanceof NameExpr n && f.bound.containsKey(n.getNameAsString())) {
            return f.bound.get(n.getNameAsString());
        }
        return types.typeOf(scope);
    }

    /**
     * The parameters of {@code t} that the call {@code at} binds to a class of the repository narrower than the
     * parameter's type: an argument whose static type (or the caller's own binding) is a class implementing or
     * extending the parameter's interface. A call on the parameter then runs that class's override.
     */
    private Map<String, String> bind(Node at, MethodDeclaration t, Frame f) {
        if (!(at instanceof MethodCallExpr call)) {
            return Map.of();
        }
        Map<String, String> out = new HashMap<>();
        List<com.github.javaparser.ast.body.Parameter> params = t.getParameters();
        for (int i = 0; i < params.size() && i < call.getArguments().size(); i++) {
            String declared = Types.simple(params.get(i).getType());
            Expression a = call.getArgument(i);
            if (!(a instanceof NameExpr || a instanceof FieldAccessExpr || a instanceof ThisExpr)) {
                continue;
            }
            String actual = boundType(a, f);
            if (actual == null || actual.equals(declared) || !types.isRepoType(actual) || !types.isRepoType(declared)) {
                continue;
            }
            boolean narrower = repo.types(actual, call).stream()
                    .anyMatch(x -> x instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration cd
                            && !cd.isInterface()
                            && lineageNames(cd).contains(declared));
            if (narrower) {
                out.put(params.get(i).getNameAsString(), actual);
            }
        }
        return out.isEmpty() ? Map.of() : out;
    }

    /** The simple names of the types {@code t} extends or implements, itself and through its repository supertypes. */
    private Set<String> lineageNames(com.github.javaparser.ast.body.ClassOrInterfaceDeclaration t) {
        Set<String> out = new HashSet<>();
        java.util.ArrayDeque<com.github.javaparser.ast.body.ClassOrInterfaceDeclaration> todo =
                new java.util.ArrayDeque<>(List.of(t));
        while (!todo.isEmpty() && out.size() < 16) {
            com.github.javaparser.ast.body.ClassOrInterfaceDeclaration c = todo.pop();
            List<com.github.javaparser.ast.type.ClassOrInterfaceType> supers = new ArrayList<>(c.getExtendedTypes());
            supers.addAll(c.getImplementedTypes());
            for (com.github.javaparser.ast.type.ClassOrInterfaceType s : supers) {
                if (out.add(s.getNameAsString())) {
                    repo.types(s.getNameAsString(), c).stream()
                            .filter(x -> x instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration)
                            .map(x -> (com.github.javaparser.ast.body.ClassOrInterfaceDeclaration) x)
                            .forEach(todo::add);
                }
            }
        }
        return out;
    }

    /**
     * A method run on another thread by its framework when called through its bean: Spring's (or Micronaut's)
     * {@code @Async}, EJB's {@code @Asynchronous}, on the method or its class. A call on {@code this} bypasses the
     * proxy and runs in the caller's thread; a caller that waits on the returned future ({@code .get()},
     * {@code .join()}) or returns it does not hand the work off.
     */
    private static boolean springAsync(Node at, MethodDeclaration t, TypeDeclaration<?> owner, boolean self, Frame f) {
        if (self
                || f.async != null
                || !(at instanceof MethodCallExpr call)
                || call.getScope().filter(x -> !(x instanceof ThisExpr)).isEmpty()
                || waitedFor(call)) {
            return false;
        }
        return Types.annotated(t.getAnnotations(), "Async")
                || Types.annotated(t.getAnnotations(), "Asynchronous")
                || owner != null
                        && (Types.annotated(owner.getAnnotations(), "Async")
                                || Types.annotated(owner.getAnnotations(), "Asynchronous"));
    }

    /**
     * The overrides a call can run: those in build modules the consumer's module depends on (an implementation in a
     * module it does not see never runs behind the call), or all of them when none is.
     */
    private List<MethodDeclaration> visible(List<MethodDeclaration> targets) {
        if (entry == null || entry.source == null) {
            return targets;
        }
        List<MethodDeclaration> visible = targets.stream()
                .filter(t -> {
                    Repo.Source src = repo.sourceOf(t);
                    return src == null || repo.sees(entry.source.module(), src.module());
                })
                .toList();
        return visible.isEmpty() ? targets : visible;
    }

    /** The lines of the entry's body and of every method the last {@link #trace} entered. */
    List<Engine.Span> spans() {
        return List.copyOf(spans);
    }

    private void span(Node n) {
        Location from = repo.loc(n);
        int to = n.getEnd().map(p -> p.line).orElse(from.line());
        spans.add(new Engine.Span(from.file(), from.line(), to));
    }

    // ---- events -----------------------------------------------------------------------------------

    /** The nodes an effect was recorded at in this trace. */
    private final Set<Node> effectNodes = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());

    private void effect(Node at, Frame f, Blast blast, Event.Category category, String what, boolean keyed) {
        effect(at, f, blast, category, what, keyed, null);
    }

    /** An effect located at {@code builtAt} when not null: where the request it sends was built and handed out. */
    private void effect(
            Node at, Frame f, Blast blast, Event.Category category, String what, boolean keyed, Location builtAt) {
        effectNodes.add(at);
        if (category == Event.Category.DATABASE && entry != null && entry.jtaTransaction != null) {
            // a database write in a JMS listener whose container runs a JTA transaction: the module's XA data
            // source rolls it back with the receive, so a redelivery follows no committed copy
            what += " in the listener's JTA transaction";
            keyed = true;
        }
        if ((category == Event.Category.PUBLISH || category == Event.Category.EXTERNAL)
                && entry != null
                && "debezium".equals(entry.broker)) {
            // a change-data-capture relay forwards change events that carry their source position (LSN, binlog
            // offset) to a broker or an endpoint: Debezium documents its delivery as at least once and its consumers
            // dedupe on that position, so a replayed batch sent again is the contract, not a defect; losing a record
            // is still one, and a row the handler stores itself is still its own duplicate
            keyed = true;
        }
        List<Step> path = new ArrayList<>(f.path);
        path.add(new Step(shortText(at), repo.loc(at)));
        // a generic request helper (doRequest(params, url, HttpMethod method, payload)) sends whatever its callers ask:
        // the effect is each caller's, where the verb and the body are chosen, not the one line they all share
        Location where = builtAt != null
                ? builtAt
                : category == Event.Category.EXTERNAL && takesItsVerb(f) && f.path.size() > 1
                        ? f.path.get(f.path.size() - 1).location()
                        : repo.loc(at);
        Blast b = blast;
        if (category == Event.Category.EXTERNAL && b == Blast.DATA) {
            String context = String.join(" ", path.stream().map(Step::name).toList());
            b = MONEY.matcher(context).matches()
                    ? Blast.MONEY
                    : NOTIFY.matcher(context).matches() ? Blast.NOTIFICATION : b;
        }
        events.add(new Event(
                Event.Kind.EFFECT,
                seq++,
                where,
                List.copyOf(path),
                b,
                category,
                what,
                f.tx,
                f.txLoc,
                keyed,
                member(at),
                f.async,
                arms(at, f)));
    }

    /** The frame's method takes the HTTP verb it sends as a parameter ({@code HttpMethod method}). */
    private static boolean takesItsVerb(Frame f) {
        return f.method != null
                && f.method.getParameters().stream()
                        .anyMatch(p -> Types.simple(p.getType()).equals("HttpMethod"));
    }

    private void add(Event.Kind kind, Node at, Frame f, Blast blast, Location related, String what) {
        List<Step> path = new ArrayList<>(f.path);
        path.add(new Step(shortText(at), repo.loc(at)));
        events.add(new Event(
                kind,
                seq++,
                repo.loc(at),
                List.copyOf(path),
                blast,
                null,
                what,
                f.tx,
                kind == Event.Kind.SELF_INVOCATION ? related : f.txLoc,
                false,
                member(at),
                f.async,
                arms(at, f)));
    }

    /** Ids of the if/else, switch and early-exit nodes the trace has seen, for {@link #arms}. */
    private final Map<Node, Long> branchIds = new java.util.IdentityHashMap<>();

    /**
     * The frame's branches, and those {@code at} sits on within its method: the then or else of an if, the
     * arm of a switch or conditional, and the implicit else after an {@code if} whose block ends in
     * return, throw, continue or break. Each as {@code id << 8 | arm}.
     */
    private List<Long> arms(Node at, Frame f) {
        List<Long> out = new ArrayList<>(f.arms);
        Node child = at;
        for (Node parent = at.getParentNode().orElse(null);
                parent != null
                        && !(child instanceof MethodDeclaration)
                        && !(child instanceof com.github.javaparser.ast.body.ConstructorDeclaration)
                        && !(child instanceof TypeDeclaration<?>);
                child = parent, parent = parent.getParentNode().orElse(null)) {
            if (parent instanceof com.github.javaparser.ast.stmt.IfStmt i) {
                if (i.getThenStmt() == child) {
                    out.add(branch(i, 0));
                } else if (i.getElseStmt().orElse(null) == child) {
                    out.add(branch(i, 1));
                }
            } else if (parent instanceof com.github.javaparser.ast.expr.ConditionalExpr c) {
                if (c.getThenExpr() == child) {
                    out.add(branch(c, 0));
                } else if (c.getElseExpr() == child) {
                    out.add(branch(c, 1));
                }
            } else if (parent instanceof com.github.javaparser.ast.stmt.SwitchEntry se
                    && se.getParentNode().isPresent()) {
                Node sw = se.getParentNode().get();
                Node inArm = child;
                if (se.getLabels().stream().noneMatch(l -> l == inArm)) {
                    List<com.github.javaparser.ast.stmt.SwitchEntry> entries = sw.getChildNodes().stream()
                            .filter(com.github.javaparser.ast.stmt.SwitchEntry.class::isInstance)
                            .map(com.github.javaparser.ast.stmt.SwitchEntry.class::cast)
                            .toList();
                    int idx = entries.indexOf(se);
                    // a statement-group arm without break falls through into the next: not exclusive
                    boolean arrow = se.getType() != com.github.javaparser.ast.stmt.SwitchEntry.Type.STATEMENT_GROUP;
                    if (idx >= 0 && (arrow || endsAbruptly(se.getStatements()))) {
                        out.add(branch(sw, Math.min(idx, 250)));
                    }
                }
            }
            if (parent instanceof com.github.javaparser.ast.stmt.BlockStmt b && child instanceof Statement st) {
                for (Statement before : b.getStatements()) {
                    if (before == st) {
                        break;
                    }
                    if (before instanceof com.github.javaparser.ast.stmt.IfStmt i
                            && i.getElseStmt().isEmpty()
                            && endsAbruptly(i.getThenStmt())) {
                        out.add(branch(i, 1));
                    }
                }
            }
        }
        return out.isEmpty() ? List.of() : List.copyOf(out);
    }

    private long branch(Node n, int arm) {
        return branchIds.computeIfAbsent(n, x -> (long) branchIds.size() + 1) << 8 | arm;
    }

    private static boolean endsAbruptly(Statement s) {
        if (s instanceof com.github.javaparser.ast.stmt.BlockStmt b) {
            return endsAbruptly(b.getStatements());
        }
        return s.isReturnStmt() || s.isThrowStmt() || s.isContinueStmt() || s.isBreakStmt();
    }

    private static boolean endsAbruptly(NodeList<Statement> statements) {
        return statements.isNonEmpty() && endsAbruptly(statements.getLast().get());
    }

    private static String member(Node at) {
        TypeDeclaration<?> t = Types.enclosingType(at);
        String m = Types.ancestor(at, MethodDeclaration.class)
                .map(MethodDeclaration::getNameAsString)
                .orElse("<init>");
        return (t == null ? "?" : t.getNameAsString()) + "." + m;
    }

    static String shortText(Node n) {
        String s = Repo.printed(n).replaceAll("\\s+", " ");
        return s.length() > 80 ? s.substring(0, 77) + "..." : s;
    }

    private static String decapitalize(String s) {
        return s.isEmpty() ? s : Character.toLowerCase(s.charAt(0)) + s.substring(1);
    }

    static String shortText0(String s) {
        String t = s.replaceAll("\\s+", " ");
        return t.length() > 80 ? t.substring(0, 77) + "..." : t;
    }
}
