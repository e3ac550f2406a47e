package dev.once.spring;

import dev.once.InvalidConfigurationException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.springframework.core.MethodParameter;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.ResolvableType;
import org.springframework.expression.Expression;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.CompoundExpression;
import org.springframework.expression.spel.ast.MethodReference;
import org.springframework.expression.spel.ast.PropertyOrFieldReference;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;

/**
 * Checks an {@code eventId} expression against the listener method's declared types when the context
 * starts, so a typo ({@code #p0.payload.idd}, {@code #record} without {@code -parameters}) stops the start
 * naming the method and the expression, instead of sending every message to the dead-letter topic with
 * the reason only in its headers. It follows the chains SpEL evaluates reflectively: a variable (a
 * parameter by name, {@code #p0}/{@code #a0}, {@code #root}) then properties and methods, generics
 * resolved; whatever it cannot type (a bean reference, an indexer, {@code Object}, a {@code Map}) is left
 * to the evaluation.
 */
final class EventIdCheck {

    private EventIdCheck() {}

    /**
     * @param root  the declared type of {@code #root} (the message argument, or a batch's element)
     * @param batch whether the expression runs per element of a batch listener's list ({@code #p0} is the
     *              element)
     */
    static void check(
            Expression expression,
            Method method,
            ResolvableType root,
            boolean batch,
            ParameterNameDiscoverer names,
            String where) {
        if (!(expression instanceof SpelExpression spel)) {
            return;
        }
        walk(spel.getAST(), new Scope(method, root, batch, names), expression.getExpressionString(), where);
    }

    private record Scope(Method method, ResolvableType root, boolean batch, ParameterNameDiscoverer names) {}

    private static void walk(SpelNode node, Scope scope, String text, String where) {
        if (node instanceof VariableReference || node instanceof CompoundExpression) {
            chain(node, scope, text, where);
            return;
        }
        for (int i = 0; i < node.getChildCount(); i++) {
            walk(node.getChild(i), scope, text, where);
        }
    }

    private static void chain(SpelNode node, Scope scope, String text, String where) {
        List<SpelNode> links = node instanceof CompoundExpression
                ? java.util.stream.IntStream.range(0, node.getChildCount())
                        .mapToObj(node::getChild)
                        .toList()
                : List.of(node);
        ResolvableType type = null;
        for (int i = 0; i < links.size(); i++) {
            SpelNode link = links.get(i);
            if (i == 0) {
                if (!(link instanceof VariableReference)) {
                    walk(link, scope, text, where); // a bean reference, a literal, …: check what is inside
                    return;
                }
                type = variable(link.toStringAST().substring(1), scope, text, where);
            } else if (link instanceof PropertyOrFieldReference p) {
                type = member(type, p.getName(), -1, text, where);
            } else if (link instanceof MethodReference m) {
                for (int a = 0; a < m.getChildCount(); a++) {
                    walk(m.getChild(a), scope, text, where);
                }
                type = member(type, m.getName(), m.getChildCount(), text, where);
            } else {
                return; // an indexer, a projection, a safe-navigation we do not follow
            }
            if (type == null) {
                return;
            }
        }
    }

    private static ResolvableType variable(String name, Scope scope, String text, String where) {
        if (name.equals("root") || name.equals("this")) {
            return scope.root();
        }
        Class<?>[] types = scope.method().getParameterTypes();
        if (name.matches("[ap]\\d+")) {
            int index = Integer.parseInt(name.substring(1));
            if (scope.batch()) {
                return index == 0 ? scope.root() : null;
            }
            if (index >= types.length) {
                throw refused(where, text, "#" + name + " is past the method's " + types.length + " parameters");
            }
            return ResolvableType.forMethodParameter(scope.method(), index);
        }
        String[] parameters = scope.names().getParameterNames(scope.method());
        if (parameters == null) {
            throw refused(
                    where,
                    text,
                    "#" + name + " names a parameter, but the class was compiled without -parameters, so"
                            + " parameter names are unknown at run time; use #p0, #p1, … or compile with -parameters");
        }
        int index = Arrays.asList(parameters).indexOf(name);
        if (index < 0) {
            throw refused(
                    where,
                    text,
                    "the method has no parameter named '" + name + "' (it has " + List.of(parameters) + ")");
        }
        return scope.batch() ? scope.root() : ResolvableType.forMethodParameter(scope.method(), index);
    }

    /** The type {@code name} gives on {@code owner}; null when it cannot be known statically. */
    private static ResolvableType member(ResolvableType owner, String name, int arguments, String text, String where) {
        Class<?> c = owner == null ? null : owner.resolve();
        if (c == null || c == Object.class || Map.class.isAssignableFrom(c)) {
            return null;
        }
        String capitalized = Character.toUpperCase(name.charAt(0)) + name.substring(1);
        for (Method m : c.getMethods()) {
            boolean matches = arguments < 0
                    ? m.getParameterCount() == 0
                            && (m.getName().equals("get" + capitalized)
                                    || m.getName().equals("is" + capitalized)
                                    || m.getName().equals(name))
                    : m.getName().equals(name) && m.getParameterCount() == arguments;
            if (matches && !Modifier.isStatic(m.getModifiers())) {
                return ResolvableType.forMethodParameter(new MethodParameter(m, -1), owner);
            }
        }
        if (arguments < 0) {
            for (Field f : c.getFields()) {
                if (f.getName().equals(name) && !Modifier.isStatic(f.getModifiers())) {
                    return ResolvableType.forField(f, owner);
                }
            }
        }
        TreeSet<String> has = new TreeSet<>();
        for (Method m : c.getMethods()) {
            if (m.getDeclaringClass() != Object.class && !Modifier.isStatic(m.getModifiers())) {
                has.add(m.getName() + (m.getParameterCount() == 0 ? "()" : "(…)"));
            }
        }
        throw refused(
                where,
                text,
                c.getName() + " has no "
                        + (arguments < 0
                                ? "property '" + name + "'"
                                : "method '" + name + "' with " + arguments + " argument(s)")
                        + " (it has " + has + ")");
    }

    private static InvalidConfigurationException refused(String where, String text, String why) {
        return new InvalidConfigurationException(where + ": eventId '" + text + "' does not fit the method: " + why);
    }
}
