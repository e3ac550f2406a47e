package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.ClassOrInterfaceDeclaration;
import com.github.javaparser.ast.body.FieldDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.Parameter;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.AnnotationExpr;
import com.github.javaparser.ast.expr.AssignExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.NormalAnnotationExpr;
import com.github.javaparser.ast.expr.SingleMemberAnnotationExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import com.github.javaparser.ast.type.ClassOrInterfaceType;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Entry forms the frameworks document that the finders of {@link EntryPoints} do not read, each checked against the
 * framework's own reference: Camel's pulling consumers ({@code ConsumerTemplate.receive*}, {@code PollingConsumer}),
 * SmallRye/MicroProfile streams injected with {@code @Channel} and consumed in code, and Spring Cloud AWS 1.x/2.x's
 * {@code @MessageMapping} SQS handlers.
 */
final class DocumentedEntries {

    private final EntryPoints entries;
    private final Repo repo;
    private final Types types;
    private final Settings settings;

    DocumentedEntries(EntryPoints entries, Repo repo, Types types, Settings settings) {
        this.entries = entries;
        this.repo = repo;
        this.types = types;
        this.settings = settings;
    }

    void call(Repo.Source s, MethodCallExpr call) {
        if (CAMEL_RECEIVES.contains(call.getNameAsString())) {
            camelPoll(s, call);
        }
    }

    void type(Repo.Source s, ClassOrInterfaceDeclaration c) {
        channelStreams(s, c);
        sqsMessageMappings(s, c);
    }

    // ---- Camel: ConsumerTemplate and PollingConsumer --------------------------------------------

    private static final Set<String> CAMEL_RECEIVES =
            Set.of("receive", "receiveBody", "receiveNoWait", "receiveBodyNoWait");

    /**
     * {@code consumerTemplate.receiveBody("jms:queue:orders", 5000, String.class)}, {@code
     * fluentConsumerTemplate.withUri("kafka:t").receive()}, {@code endpoint.createPollingConsumer().receive(1000)}: the
     * caller pulls an exchange from a broker endpoint. The polling consumer takes the message off the endpoint (a JMS
     * AUTO_ACKNOWLEDGE receive, an event-driven endpoint's exchange handed over and done) before the caller's work on
     * it, so a crash after the receive loses it. A file, timer or direct endpoint is no broker.
     */
    private void camelPoll(Repo.Source s, MethodCallExpr call) {
        Expression scope = call.getScope().orElse(null);
        if (scope == null || !imports(s, "org.apache.camel")) {
            return;
        }
        String type = types.typeOf(scope);
        String uri;
        String via;
        if ("ConsumerTemplate".equals(type)) {
            if (call.getArguments().isEmpty()) {
                return;
            }
            uri = endpointUri(s, call.getArgument(0), 0);
            via = "ConsumerTemplate";
        } else if ("PollingConsumer".equals(type)) {
            uri = pollingUri(s, scope, 0);
            via = "PollingConsumer";
        } else {
            MethodCallExpr withUri = scopeCall(scope, "withUri", "withEndpoint");
            if (withUri == null || withUri.getArguments().isEmpty()) {
                return;
            }
            uri = endpointUri(s, withUri.getArgument(0), 0);
            via = "FluentConsumerTemplate";
        }
        if (uri == null || !entries.camelBroker(uri)) {
            return;
        }
        Node body = EntryPoints.loopOrMethod(call);
        MethodDeclaration m = Types.ancestor(call, MethodDeclaration.class).orElse(null);
        if (body == null || m == null || primingReceive(call, body, m)) {
            return;
        }
        Entry e = entries.add(
                s,
                "Camel " + via + "." + call.getNameAsString() + "(" + uri.split("[:?]")[0] + ":…)",
                "camel",
                EntryPoints.owner(call),
                call,
                body,
                call);
        e.loop = body != m.getBody().orElse(null);
        e.ack = Entry.Ack.AUTO;
        e.ackSetting = e.location;
        e.ackText = "the Camel polling consumer takes the message off the endpoint as " + call.getNameAsString()
                + " returns (a JMS AUTO_ACKNOWLEDGE receive, an event-driven endpoint's exchange done), before the work"
                + " on it: a crash after it loses the message";
    }

    /**
     * The first receive before the loop that repeats it ({@code x = c.receive(t); while (x != null) { …; x =
     * c.receive(t); }}): one consumer, listed at its loop.
     */
    private static boolean primingReceive(MethodCallExpr call, Node body, MethodDeclaration m) {
        return body == m.getBody().orElse(null)
                && m.findAll(MethodCallExpr.class).stream()
                        .anyMatch(o -> o != call
                                && o.getNameAsString().equals(call.getNameAsString())
                                && o.getScope().equals(call.getScope())
                                && EntryPoints.loopOrMethod(o) != body);
    }

    /** The innermost call of these names in a call's scope chain ({@code template.withUri(u).withTimeout(t)}). */
    private static MethodCallExpr scopeCall(Expression scope, String... names) {
        for (Expression x = scope;
                x instanceof MethodCallExpr c;
                x = c.getScope().orElse(null)) {
            if (Set.of(names).contains(c.getNameAsString())) {
                return c;
            }
        }
        return null;
    }

    /** An endpoint given as a URI (literal, constant, placeholder) or as an {@code Endpoint} got from getEndpoint(uri). */
    private String endpointUri(Repo.Source s, Expression x, int depth) {
        if (depth > 3) {
            return null;
        }
        if (x instanceof MethodCallExpr mc
                && mc.getNameAsString().equals("getEndpoint")
                && !mc.getArguments().isEmpty()) {
            return entries.camelUri(s, mc.getArgument(0));
        }
        if (x instanceof NameExpr n) {
            Optional<Expression> held = valueOf(n);
            if (held.isPresent() && held.get() instanceof MethodCallExpr mc) {
                return endpointUri(s, mc, depth + 1);
            }
        }
        return entries.camelUri(s, x);
    }

    /** The endpoint a polling consumer was created on: {@code endpoint.createPollingConsumer()}, held or inline. */
    private String pollingUri(Repo.Source s, Expression consumer, int depth) {
        if (depth > 3) {
            return null;
        }
        Expression created = consumer;
        if (consumer instanceof NameExpr n) {
            created = valueOf(n).orElse(null);
        } else if (consumer instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr) {
            created = valueOf(new NameExpr(fa.getNameAsString()), fa).orElse(null);
        }
        if (created instanceof MethodCallExpr mc
                && mc.getNameAsString().equals("createPollingConsumer")
                && mc.getScope().isPresent()) {
            return endpointUri(s, mc.getScope().get(), depth + 1);
        }
        return null;
    }

    /** What a local or field holds: its initializer, or what the enclosing type assigns to it. */
    private static Optional<Expression> valueOf(NameExpr n) {
        return valueOf(n, n);
    }

    private static Optional<Expression> valueOf(NameExpr n, Node at) {
        NameExpr located = n.getParentNode().isPresent() ? n : null;
        if (located != null) {
            Optional<Expression> init = EntryPoints.initializerOf(located, x -> true);
            if (init.isPresent()) {
                return init;
            }
        }
        TypeDeclaration<?> t = Types.enclosingType(at);
        if (t == null) {
            return Optional.empty();
        }
        if (located == null) {
            for (FieldDeclaration f : t.getFields()) {
                for (VariableDeclarator d : f.getVariables()) {
                    if (d.getNameAsString().equals(n.getNameAsString())
                            && d.getInitializer().isPresent()) {
                        return d.getInitializer();
                    }
                }
            }
        }
        for (AssignExpr a : t.findAll(AssignExpr.class)) {
            Expression target = a.getTarget();
            String name = target instanceof NameExpr tn
                    ? tn.getNameAsString()
                    : target instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr
                            ? fa.getNameAsString()
                            : null;
            if (n.getNameAsString().equals(name)) {
                return Optional.of(a.getValue());
            }
        }
        return Optional.empty();
    }

    // ---- SmallRye / MicroProfile Reactive Messaging: @Channel streams consumed in code -----------

    private static final Set<String> CHANNEL_STREAMS =
            Set.of("Multi", "Publisher", "PublisherBuilder", "Flowable", "Flux");

    /**
     * {@code @Inject @Channel("prices") Multi<Double> prices;} then {@code prices.subscribe().with(…)} (or returned to
     * a server-sent-events endpoint): the application consumes the channel in its own code instead of an {@code
     * @Incoming} method. It is a broker's when the channel is configured as incoming ({@code mp.messaging.incoming.
     * prices.*}) or nothing in the repository produces it (Quarkus connects an unproduced channel to the one connector
     * on the class path); a channel an {@code @Outgoing} method or an {@code Emitter} feeds is in memory, and an
     * injected {@code Emitter} sends. Payloads are acknowledged as the stream hands them over (SmallRye's injected
     * payload streams auto-acknowledge), a {@code Message<…>} stream by the subscriber's {@code ack()}.
     */
    private void channelStreams(Repo.Source s, ClassOrInterfaceDeclaration c) {
        if (!imports(s, "org.eclipse.microprofile.reactive.messaging")
                && !imports(s, "io.smallrye.reactive.messaging")) {
            return;
        }
        for (FieldDeclaration f : c.getFields()) {
            for (VariableDeclarator v : f.getVariables()) {
                channelStream(s, c, f.getAnnotations(), v.getType(), v.getNameAsString(), f);
            }
        }
        c.getConstructors()
                .forEach(k -> k.getParameters()
                        .forEach(p -> channelStream(s, c, p.getAnnotations(), p.getType(), p.getNameAsString(), p)));
    }

    private void channelStream(
            Repo.Source s,
            ClassOrInterfaceDeclaration c,
            List<AnnotationExpr> anns,
            com.github.javaparser.ast.type.Type type,
            String name,
            Node decl) {
        Optional<AnnotationExpr> channel = Types.annotation(anns, "Channel");
        if (channel.isEmpty() || !(type instanceof ClassOrInterfaceType ct)) {
            return;
        }
        String stream = ct.getNameAsString();
        if (!CHANNEL_STREAMS.contains(stream)) {
            return; // an Emitter or MutinyEmitter sends
        }
        String channelName = stringValue(channel.get());
        if (channelName == null
                || producedInRepo(channelName)
                        && !settings.hasPrefix(s.module(), "mp.messaging.incoming." + channelName + ".")) {
            return;
        }
        Node use = firstUse(c, name, decl);
        if (use == null) {
            return;
        }
        MethodDeclaration m = Types.ancestor(use, MethodDeclaration.class).orElse(null);
        if (m == null || m.getBody().isEmpty()) {
            return;
        }
        Entry e = entries.add(
                s,
                "SmallRye @Channel " + stream + " stream",
                "smallrye",
                EntryPoints.owner(m),
                decl,
                m.getBody().get(),
                use);
        e.location = repo.span(decl, use);
        boolean messages = ct.getTypeArguments()
                .filter(a -> a.size() == 1 && Types.simple(a.get(0)).equals("Message"))
                .isPresent();
        if (messages) {
            e.ack = Entry.Ack.EXPLICIT;
            e.ackCalls = Set.of("ack", "nack");
            e.ackText = "message.ack() in the subscriber; a message not acknowledged holds the connector's commit back";
        } else {
            e.ack = Entry.Ack.AUTO;
            e.ackSetting = repo.loc(channel.get());
            e.ackText = "an injected payload stream acknowledges each message as it hands the payload over, before the"
                    + " subscriber's work on it: a crash after it loses the message";
        }
    }

    private final Map<String, Boolean> produced = new HashMap<>();

    /**
     * Something in the repository feeds the channel: an {@code @Outgoing} method or an injected Emitter, naming it by
     * its literal or by a constant holding it ({@code @Outgoing(TEAM_STATS_CHANNEL_NAME)}).
     */
    private boolean producedInRepo(String channel) {
        return produced.computeIfAbsent(channel, ch -> {
            String literal = "\"" + Pattern.quote(ch) + "\"";
            Set<String> names = new java.util.TreeSet<>();
            names.add(literal);
            Pattern constant = Pattern.compile("\\b([A-Za-z_$][\\w$]*)\\s*=\\s*" + literal + "\\s*;");
            for (Repo.RawFile f : repo.rawFiles()) {
                if (f.text().contains(ch)) {
                    java.util.regex.Matcher m = constant.matcher(f.text());
                    while (m.find()) {
                        names.add("(?:[\\w$]+\\.)*" + Pattern.quote(m.group(1)) + "\\b");
                    }
                }
            }
            String name = "\\(\\s*(?:value\\s*=\\s*)?(?:" + String.join("|", names) + ")";
            Pattern p = Pattern.compile(
                    "@(?:Outgoing" + name + "|Channel" + name
                            + "\\s*\\)\\s*(?:@\\w+\\s+)*(?:private\\s+|final\\s+|protected\\s+|public\\s+)*(?:Mutiny)?Emitter\\b)");
            return repo.rawFiles().stream().anyMatch(f -> p.matcher(f.text()).find());
        });
    }

    /** The first expression of the class that reads the field or constructor parameter (after its declaration). */
    private static Node firstUse(ClassOrInterfaceDeclaration c, String name, Node decl) {
        Node first = null;
        for (NameExpr n : c.findAll(NameExpr.class, x -> x.getNameAsString().equals(name))) {
            first = earlier(first, n, decl);
        }
        for (FieldAccessExpr fa : c.findAll(
                FieldAccessExpr.class, x -> x.getNameAsString().equals(name) && x.getScope() instanceof ThisExpr)) {
            if (!(fa.getParentNode().orElse(null) instanceof AssignExpr a && a.getTarget() == fa)) {
                first = earlier(first, fa, decl);
            }
        }
        return first;
    }

    private static Node earlier(Node best, Node n, Node decl) {
        if (decl.isAncestorOf(n) || n.getBegin().isEmpty()) {
            return best;
        }
        if (decl instanceof Parameter
                && Types.ancestor(n, MethodDeclaration.class).isEmpty()) {
            return best; // a constructor parameter read in the constructor only stores it
        }
        return best == null || n.getBegin().get().isBefore(best.getBegin().get()) ? n : best;
    }

    private static String stringValue(AnnotationExpr a) {
        Expression v = null;
        if (a instanceof SingleMemberAnnotationExpr sm) {
            v = sm.getMemberValue();
        } else if (a instanceof NormalAnnotationExpr na) {
            v = na.getPairs().stream()
                    .filter(p -> p.getNameAsString().equals("value"))
                    .map(p -> p.getValue())
                    .findFirst()
                    .orElse(null);
        }
        return v instanceof StringLiteralExpr lit ? lit.getValue() : null;
    }

    // ---- Spring Cloud AWS 1.x/2.x: @MessageMapping("queue") on an SQS QueueMessageHandler ---------

    /**
     * Spring Cloud AWS before 3.0 documents {@code @MessageMapping("queue")} beside {@code @SqsListener}: the
     * QueueMessageHandler calls the method per message and deletes it when the method returns (the default deletion
     * policy). The same annotation maps STOMP (WebSocket) and RSocket messages, which come from no queue: a method is
     * an SQS handler only in a module that uses Spring Cloud AWS messaging and has no WebSocket broker or RSocket,
     * outside a {@code @Controller}.
     */
    private void sqsMessageMappings(Repo.Source s, ClassOrInterfaceDeclaration c) {
        if (Types.annotated(c.getAnnotations(), "Controller", "RestController") || !sqsMessagingModule(s.module())) {
            return;
        }
        for (MethodDeclaration m : c.getMethods()) {
            Optional<AnnotationExpr> mapping = Types.annotation(m.getAnnotations(), "MessageMapping");
            if (mapping.isEmpty() || m.getBody().isEmpty() || Types.annotated(m.getAnnotations(), "SqsListener")) {
                continue;
            }
            Entry e = entries.add(
                    s,
                    "Spring Cloud AWS @MessageMapping (SQS)",
                    "sqs",
                    EntryPoints.owner(m),
                    m,
                    m.getBody().get(),
                    m);
            e.ackText = "the QueueMessageHandler deletes the message after the method returns (the default deletion"
                    + " policy); a failure or crash makes it visible again";
        }
    }

    private final Map<Path, Boolean> sqsMessaging = new HashMap<>();

    private boolean sqsMessagingModule(Path module) {
        return sqsMessaging.computeIfAbsent(module, mod -> {
            boolean aws = false;
            for (Repo.RawFile f : repo.rawFiles()) {
                if (!repo.moduleOf(f.file()).equals(mod)) {
                    continue;
                }
                String t = f.text();
                if (t.contains("EnableWebSocketMessageBroker")
                        || t.contains("rsocket")
                        || t.contains("SimpMessagingTemplate")
                        || t.contains("messaging.simp.")) {
                    return false;
                }
                aws |= t.contains("org.springframework.cloud.aws.messaging")
                        || t.contains("io.awspring.cloud.messaging")
                        || t.contains("QueueMessagingTemplate")
                        || t.contains("QueueMessageHandler");
            }
            return aws;
        });
    }

    private static boolean imports(Repo.Source s, String prefix) {
        return s.cu().getImports().stream().anyMatch(i -> i.getNameAsString().startsWith(prefix));
    }
}
