package dev.once.scan.internal;

import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.LambdaExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import com.github.javaparser.ast.type.ClassOrInterfaceType;
import com.github.javaparser.ast.type.Type;
import com.github.javaparser.ast.type.WildcardType;
import java.util.Set;

/**
 * The type of a lambda's parameter that the source leaves to inference, where the lambda is given an element of a
 * collection whose declaration states its element type: {@code handlers.forEach(h -> h.handle(event))}, {@code
 * handlers.stream().filter(h -> h.canHandle(type)).forEach(h -> h.handle(type, callback))}, {@code
 * Flux.fromIterable(listeners).map(l -> …)}, {@code routes.forEach((key, route) -> …)} on a map. Spring injects every
 * bean of an interface into a {@code List<Handler>} field or constructor parameter, and a dispatcher hands the message
 * to each: without the element type the call on the lambda's parameter resolved to nothing and the handlers' work was
 * never walked. Only steps that keep the element ({@code filter}, {@code sorted}, {@code distinct}, {@code peek},
 * {@code limit}, {@code skip}) are looked through; a {@code map} changes it, and its lambdas' parameters downstream
 * stay unknown.
 */
final class Elements {

    /** Calls that hand their lambda one element of the stream or collection they are called on. */
    private static final Set<String> PER_ELEMENT = Set.of(
            "forEach",
            "forEachOrdered",
            "filter",
            "map",
            "flatMap",
            "peek",
            "anyMatch",
            "allMatch",
            "noneMatch",
            "takeWhile",
            "dropWhile",
            "removeIf",
            "doOnNext",
            "concatMap",
            "subscribe");

    /** Stream steps whose elements are those of the stream they are called on. */
    private static final Set<String> KEEPS_ELEMENT = Set.of(
            "filter",
            "sorted",
            "distinct",
            "peek",
            "limit",
            "skip",
            "takeWhile",
            "dropWhile",
            "parallel",
            "sequential",
            "unordered");

    /** Declared types whose single type argument is their element. */
    private static final Set<String> COLLECTIONS = Set.of(
            "Iterable",
            "Collection",
            "List",
            "Set",
            "SortedSet",
            "NavigableSet",
            "Queue",
            "Deque",
            "ArrayList",
            "LinkedList",
            "HashSet",
            "LinkedHashSet",
            "TreeSet",
            "CopyOnWriteArrayList",
            "CopyOnWriteArraySet",
            "Stream");

    private static final Set<String> MAPS = Set.of(
            "Map",
            "HashMap",
            "LinkedHashMap",
            "TreeMap",
            "SortedMap",
            "NavigableMap",
            "ConcurrentHashMap",
            "ConcurrentMap",
            "EnumMap");

    /** Reactive sources made from a collection: their elements are the collection's. */
    private static final Set<String> FROM_COLLECTION = Set.of("fromIterable", "from", "fromStream");

    private Elements() {}

    /** The element type given to parameter {@code index} of {@code l}, or null when the source does not say it. */
    static Type parameter(Types types, LambdaExpr l, int index) {
        if (!(l.getParentNode().orElse(null) instanceof MethodCallExpr call)
                || !PER_ELEMENT.contains(call.getNameAsString())
                || call.getScope().isEmpty()
                || call.getArguments().stream().noneMatch(a -> a == l)) {
            return null;
        }
        int params = l.getParameters().size();
        if (params == 2 && call.getNameAsString().equals("forEach")) {
            // Map.forEach((key, value) -> …)
            Type t = declared(types, call.getScope().get());
            return t instanceof ClassOrInterfaceType c && MAPS.contains(c.getNameAsString())
                    ? argument(c, 2, index)
                    : null;
        }
        if (params != 1 || index != 0) {
            return null;
        }
        return element(types, call.getScope().get(), 0);
    }

    /** The element type of a stream, collection or reactive source expression. */
    private static Type element(Types types, Expression e, int depth) {
        if (depth > 8) {
            return null;
        }
        if (e instanceof MethodCallExpr m) {
            String n = m.getNameAsString();
            if (KEEPS_ELEMENT.contains(n) && m.getScope().isPresent()) {
                return element(types, m.getScope().get(), depth + 1);
            }
            if ((n.equals("stream") || n.equals("parallelStream"))
                    && m.getArguments().isEmpty()
                    && m.getScope().isPresent()) {
                return collectionElement(declared(types, m.getScope().get()));
            }
            if (FROM_COLLECTION.contains(n)
                    && m.getArguments().size() == 1
                    && m.getScope()
                            .filter(x -> x.toString().matches("Flux|Observable|Flowable|Multi"))
                            .isPresent()) {
                return collectionElement(declared(types, m.getArgument(0)));
            }
        }
        return collectionElement(declared(types, e));
    }

    /** The declared type of a name, a field of this object, or what a method of this class returns. */
    private static Type declared(Types types, Expression e) {
        if (e instanceof NameExpr n) {
            return types.declaredType(n, n.getNameAsString());
        }
        if (e instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr) {
            return types.fieldType(Types.enclosingType(fa), fa.getNameAsString(), 0);
        }
        if (e instanceof MethodCallExpr m
                && (m.getScope().isEmpty() || m.getScope().get() instanceof ThisExpr)) {
            TypeDeclaration<?> owner = Types.enclosingType(m);
            if (owner == null) {
                return null;
            }
            for (MethodDeclaration md : owner.getMethodsByName(m.getNameAsString())) {
                if (md.getParameters().size() == m.getArguments().size()
                        && !md.getType().isVoidType()) {
                    return md.getType();
                }
            }
        }
        return null;
    }

    private static Type collectionElement(Type t) {
        return t instanceof ClassOrInterfaceType c && COLLECTIONS.contains(c.getNameAsString())
                ? argument(c, 1, 0)
                : null;
    }

    /** Type argument {@code index} of {@code c} when it has {@code count} of them, a wildcard's bound read through. */
    private static Type argument(ClassOrInterfaceType c, int count, int index) {
        if (c.getTypeArguments().filter(a -> a.size() == count).isEmpty()) {
            return null;
        }
        Type a = c.getTypeArguments().get().get(index);
        if (a instanceof WildcardType w) {
            return w.getExtendedType().map(Type.class::cast).orElse(null);
        }
        return a instanceof ClassOrInterfaceType ? a : null;
    }
}
