package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.BinaryExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import com.github.javaparser.ast.expr.TextBlockLiteralExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** String values the code states: the SQL a call runs or an annotation holds, wherever its constants are declared. */
final class Constants {

    private final Repo repo;

    Constants(Repo repo) {
        this.repo = repo;
    }

    /** The text of the string expression {@code a}, read where {@code at} is; null when it is not a string in sight. */
    String text(Expression a, Node at) {
        return literal(a, at, 0);
    }

    /**
     * The text of a string expression: literals, concatenations (an unknown part as {@code ?}), {@code String.format}
     * and {@code formatted} templates, and constants wherever they are declared: a local or field in sight of
     * {@code at}, a constant of another class ({@code Sql.INSERT_ORDER}, a static import, an interface or superclass
     * of the class), so a statement kept in a queries class of another module is read where it runs.
     */
    private String literal(Expression a, Node at, int depth) {
        if (depth > 4) {
            return null;
        }
        if (a instanceof StringLiteralExpr s) {
            return s.getValue();
        }
        if (a instanceof TextBlockLiteralExpr t) {
            return t.getValue();
        }
        if (a instanceof BinaryExpr b && b.getOperator() == BinaryExpr.Operator.PLUS) {
            String l = literal(b.getLeft(), at, depth + 1);
            String r = literal(b.getRight(), at, depth + 1);
            return l == null && r == null ? null : (l == null ? "?" : l) + (r == null ? "?" : r);
        }
        if (a instanceof MethodCallExpr m) {
            boolean format = m.getNameAsString().equals("format")
                    && m.getScope().map(x -> x.toString().equals("String")).orElse(false)
                    && m.getArguments().isNonEmpty();
            boolean formatted =
                    m.getNameAsString().equals("formatted") && m.getScope().isPresent();
            if (!format && !formatted) {
                return returned(m, at, depth);
            }
            String template = literal(format ? m.getArgument(0) : m.getScope().get(), at, depth + 1);
            List<Expression> values =
                    format ? m.getArguments().subList(1, m.getArguments().size()) : m.getArguments();
            // each %s takes its value's text when it is a constant too (a table name), else stands for a value
            StringBuilder out = new StringBuilder();
            Matcher slot = Pattern.compile("%[sd]").matcher(template == null ? "" : template);
            int i = 0;
            while (slot.find()) {
                String v = i < values.size() ? literal(values.get(i), at, depth + 1) : null;
                i++;
                slot.appendReplacement(out, Matcher.quoteReplacement(v == null ? "?" : v));
            }
            return template == null ? null : slot.appendTail(out).toString();
        }
        if (a instanceof FieldAccessExpr fa
                && !(fa.getScope() instanceof ThisExpr)
                && Character.isUpperCase(
                        fa.getScope().toString().replaceAll(".*\\.", "").charAt(0))) {
            return constant(fa.getScope().toString().replaceAll(".*\\.", ""), fa.getNameAsString(), at, depth);
        }
        if (a instanceof NameExpr n) {
            String name = n.getNameAsString();
            TypeDeclaration<?> t = Types.enclosingType(at);
            MethodDeclaration m = Types.ancestor(at, MethodDeclaration.class).orElse(null);
            for (Node scope : new Node[] {m, t}) {
                if (scope == null) {
                    continue;
                }
                for (VariableDeclarator d : scope.findAll(
                        VariableDeclarator.class, v -> v.getNameAsString().equals(name))) {
                    if (d.getInitializer().isPresent()) {
                        String v = literal(d.getInitializer().get(), d, depth + 1);
                        if (v != null) {
                            return v;
                        }
                    }
                }
            }
            // a constant the class inherits (an interface of queries, a base DAO) or imports statically
            List<String> owners = new ArrayList<>();
            if (t instanceof com.github.javaparser.ast.body.ClassOrInterfaceDeclaration c) {
                c.getExtendedTypes().forEach(x -> owners.add(x.getNameAsString()));
                c.getImplementedTypes().forEach(x -> owners.add(x.getNameAsString()));
            }
            at.findCompilationUnit()
                    .ifPresent(cu -> cu.getImports().stream()
                            .filter(i -> i.isStatic()
                                    && (i.isAsterisk()
                                            || i.getName().getIdentifier().equals(name)))
                            .map(i -> i.isAsterisk()
                                    ? i.getName()
                                    : i.getName().getQualifier().orElse(null))
                            .filter(java.util.Objects::nonNull)
                            .forEach(q -> owners.add(q.getIdentifier())));
            for (String owner : owners) {
                String v = constant(owner, name, at, depth);
                if (v != null) {
                    return v;
                }
            }
        }
        return null;
    }

    /**
     * The text a query builder's method returns ({@code queryBuilder.insertMappingQuery()}, a static {@code
     * Queries.insertOrder()}, a method of the class itself): a method of the repository whose body is one {@code
     * return} of a string expression, found on the type of the field, class or {@code this} it is called on.
     */
    private String returned(MethodCallExpr m, Node at, int depth) {
        TypeDeclaration<?> here = Types.enclosingType(at);
        String owner = null;
        Expression scope = m.getScope().orElse(null);
        if (scope == null || scope instanceof ThisExpr) {
            owner = here == null ? null : here.getNameAsString();
        } else if (scope instanceof NameExpr n) {
            String name = n.getNameAsString();
            owner = Character.isUpperCase(name.charAt(0)) ? name : null;
            for (com.github.javaparser.ast.body.FieldDeclaration fd :
                    here == null ? List.<com.github.javaparser.ast.body.FieldDeclaration>of() : here.getFields()) {
                for (VariableDeclarator v : fd.getVariables()) {
                    if (v.getNameAsString().equals(name)) {
                        owner = Types.simple(v.getType());
                    }
                }
            }
        }
        if (owner == null) {
            return null;
        }
        for (TypeDeclaration<?> t : repo.types(owner, at)) {
            for (MethodDeclaration md : t.getMethodsByName(m.getNameAsString())) {
                if (md.getParameters().size() != m.getArguments().size()
                        || md.getBody().map(b -> b.getStatements().size() != 1).orElse(true)
                        || !(md.getBody().get().getStatement(0) instanceof com.github.javaparser.ast.stmt.ReturnStmt r)
                        || r.getExpression().isEmpty()) {
                    continue;
                }
                String v = literal(r.getExpression().get(), r, depth + 1);
                if (v != null) {
                    return v;
                }
            }
        }
        return null;
    }

    /** The text of the string constant {@code name} that the repository's class {@code owner} declares. */
    private String constant(String owner, String name, Node from, int depth) {
        for (TypeDeclaration<?> t : repo.types(owner, from)) {
            for (com.github.javaparser.ast.body.FieldDeclaration fd : t.getFields()) {
                for (VariableDeclarator v : fd.getVariables()) {
                    if (v.getNameAsString().equals(name) && v.getInitializer().isPresent()) {
                        return literal(v.getInitializer().get(), v, depth + 1);
                    }
                }
            }
        }
        return null;
    }
}
