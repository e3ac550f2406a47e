package dev.once.scan.internal;

import com.github.javaparser.ast.body.FieldDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.ObjectCreationExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import com.github.javaparser.ast.expr.TypeExpr;
import java.util.Set;

/**
 * A buffer held in a field declared by its interface ({@code private final Queue<Notification> queue = new
 * ConcurrentLinkedQueue<>();}): the class it is made with says what it is. A concurrent queue kept in a field is shared
 * with whatever drains it on another thread, so putting the message there hands it off; the declared {@code Queue}
 * alone says nothing (an {@code ArrayDeque} is worked through by the same thread).
 */
final class Buffers {

    private static final Set<String> INTERFACES =
            Set.of("Queue", "Deque", "BlockingQueue", "BlockingDeque", "TransferQueue", "Collection");

    /** Calls that acknowledge a message or move a consumer's position, by the brokers' client APIs. */
    private static final java.util.regex.Pattern ACKS = java.util.regex.Pattern.compile(
            "commit|commitSync|commitAsync|ack|acknowledge|basicAck|deleteMessage|deleteMessageBatch|checkpoint"
                    + "|updateCheckpoint|updateCheckpointAsync");

    private Buffers() {}

    /**
     * Whether the file that buffers the message also acknowledges messages (RocketMQ's subscriber puts each pulled
     * message on a queue, and the same class commits their ids once the stage that drains it reports them pushed): the
     * ack travels with the buffered message and is made after its work, so the buffer hands off no acknowledged work.
     */
    static boolean drainAcknowledges(com.github.javaparser.ast.Node at) {
        return at.findCompilationUnit()
                .map(cu -> !cu.findAll(
                                com.github.javaparser.ast.expr.MethodCallExpr.class,
                                c -> ACKS.matcher(c.getNameAsString()).matches())
                        .isEmpty())
                .orElse(false);
    }

    /**
     * The simple name of the class the field {@code scope} names was made with, when its declared type is a queue
     * interface and its initializer a {@code new}; otherwise {@code declared} as it was.
     */
    static String madeAs(Types types, String declared, Expression scope) {
        if (declared == null || !INTERFACES.contains(declared)) {
            return declared;
        }
        String name = scope instanceof NameExpr n
                ? n.getNameAsString()
                : scope instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr
                        ? fa.getNameAsString()
                        : scope instanceof TypeExpr t ? t.toString() : null;
        TypeDeclaration<?> owner = Types.enclosingType(scope);
        if (name == null || owner == null) {
            return declared;
        }
        for (FieldDeclaration f : owner.getFields()) {
            for (VariableDeclarator v : f.getVariables()) {
                if (!v.getNameAsString().equals(name)
                        || !(v.getInitializer().orElse(null) instanceof ObjectCreationExpr made)) {
                    continue;
                }
                // a local or parameter of the same name is not the field
                boolean field = scope instanceof FieldAccessExpr || types.declaredType(scope, name) == v.getType();
                return field ? made.getType().getNameAsString() : declared;
            }
        }
        return declared;
    }
}
