package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.Parameter;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.AssignExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.InstanceOfExpr;
import com.github.javaparser.ast.expr.LambdaExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.TypePatternExpr;
import com.github.javaparser.ast.stmt.ForEachStmt;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Which names of a method carry the message: its data flows from the parameters that received it (or the variable a
 * receive call filled) into the locals computed from them, the objects they are copied into, the elements and lambda
 * parameters they are iterated as. A write whose arguments mention none of these names is bookkeeping (a heartbeat, a
 * metric, a timestamp), not the message's effect: a repeat of the message does not repeat it with anything new.
 *
 * <p>Names, not symbols: a name shadowed in an inner scope is taken for the outer one. That errs toward "carries".
 */
final class Dataflow {

    /** The closure of each body from its seeds: a method is walked again on every path that reaches it. */
    private final Map<Node, Map<Set<String>, Set<String>>> closures = new IdentityHashMap<>();

    /**
     * The names in {@code body} that hold the message's data when {@code seeds} do: a local initialised or assigned
     * from one, an object a setter or adder copies one into ({@code order.setSku(event.sku())}), a loop variable over
     * one, a lambda parameter of a call on one ({@code event.items().forEach(i -> …)}).
     */
    Set<String> closure(Node body, Set<String> seeds) {
        return closures.computeIfAbsent(body, b -> new java.util.HashMap<>())
                .computeIfAbsent(Set.copyOf(seeds), s -> grow(shapes.computeIfAbsent(body, Shape::new), s));
    }

    /** The nodes of a body the closure reads, collected once per body. */
    private final Map<Node, Shape> shapes = new IdentityHashMap<>();

    private static final class Shape {
        final List<VariableDeclarator> locals;
        final List<AssignExpr> assigns;
        final List<ForEachStmt> loops;
        final List<MethodCallExpr> calls;
        final List<InstanceOfExpr> patterns;
        final Set<String> declared = new HashSet<>();

        Shape(Node body) {
            locals = body.findAll(VariableDeclarator.class);
            assigns = body.findAll(AssignExpr.class);
            loops = body.findAll(ForEachStmt.class);
            calls = body.findAll(MethodCallExpr.class);
            patterns = body.findAll(InstanceOfExpr.class, i -> i.getPattern().isPresent());
            locals.forEach(d -> declared.add(d.getNameAsString()));
        }
    }

    private static Set<String> grow(Shape body, Set<String> seeds) {
        Set<String> out = new HashSet<>(seeds);
        List<VariableDeclarator> locals = body.locals;
        List<AssignExpr> assigns = body.assigns;
        List<ForEachStmt> loops = body.loops;
        List<MethodCallExpr> calls = body.calls;
        Set<String> declared = body.declared;
        boolean grew = true;
        while (grew) {
            grew = false;
            for (VariableDeclarator d : locals) {
                if (!out.contains(d.getNameAsString())
                        && d.getInitializer().map(i -> mentions(i, out)).orElse(false)) {
                    grew |= out.add(d.getNameAsString());
                }
            }
            for (AssignExpr a : assigns) {
                if (a.getTarget() instanceof NameExpr t
                        && !out.contains(t.getNameAsString())
                        && mentions(a.getValue(), out)) {
                    grew |= out.add(t.getNameAsString());
                }
            }
            // a pattern binds the value it tests under a new name (value instanceof YtelseV1 ytelse)
            for (InstanceOfExpr i : body.patterns) {
                if (mentions(i.getExpression(), out)) {
                    for (TypePatternExpr t : i.getPattern().get().findAll(TypePatternExpr.class)) {
                        grew |= out.add(t.getNameAsString());
                    }
                }
            }
            for (ForEachStmt l : loops) {
                if (mentions(l.getIterable(), out)) {
                    for (VariableDeclarator d : l.getVariable().getVariables()) {
                        grew |= out.add(d.getNameAsString());
                    }
                }
            }
            for (MethodCallExpr c : calls) {
                boolean carried = c.getScope().map(s -> mentions(s, out)).orElse(false)
                        || c.getArguments().stream().anyMatch(x -> !x.isLambdaExpr() && mentions(x, out));
                if (!carried) {
                    continue;
                }
                // a value copied into a local object makes the object carry it (entity.setSku(event.sku()))
                if (c.getScope().orElse(null) instanceof NameExpr holder
                        && declared.contains(holder.getNameAsString())
                        && !c.getArguments().isEmpty()) {
                    grew |= out.add(holder.getNameAsString());
                }
                for (Expression x : c.getArguments()) {
                    if (x instanceof LambdaExpr l) {
                        for (Parameter p : l.getParameters()) {
                            grew |= out.add(p.getNameAsString());
                        }
                    }
                }
            }
        }
        return Set.copyOf(out);
    }

    /** {@code e} reads one of {@code names}. */
    static boolean mentions(Node e, Set<String> names) {
        if (names.isEmpty()) {
            return false;
        }
        if (e instanceof NameExpr n) {
            return names.contains(n.getNameAsString());
        }
        return e.findFirst(NameExpr.class, n -> names.contains(n.getNameAsString()))
                .isPresent();
    }
}
