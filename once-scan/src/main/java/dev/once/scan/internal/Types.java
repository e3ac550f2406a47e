package dev.once.scan.internal;

import com.github.javaparser.ast.Node;
import com.github.javaparser.ast.body.CallableDeclaration;
import com.github.javaparser.ast.body.ClassOrInterfaceDeclaration;
import com.github.javaparser.ast.body.FieldDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.body.Parameter;
import com.github.javaparser.ast.body.TypeDeclaration;
import com.github.javaparser.ast.body.VariableDeclarator;
import com.github.javaparser.ast.expr.AnnotationExpr;
import com.github.javaparser.ast.expr.Expression;
import com.github.javaparser.ast.expr.FieldAccessExpr;
import com.github.javaparser.ast.expr.LambdaExpr;
import com.github.javaparser.ast.expr.MethodCallExpr;
import com.github.javaparser.ast.expr.NameExpr;
import com.github.javaparser.ast.expr.ObjectCreationExpr;
import com.github.javaparser.ast.expr.ThisExpr;
import com.github.javaparser.ast.expr.VariableDeclarationExpr;
import com.github.javaparser.ast.stmt.CatchClause;
import com.github.javaparser.ast.stmt.ForEachStmt;
import com.github.javaparser.ast.stmt.TryStmt;
import com.github.javaparser.ast.type.ClassOrInterfaceType;
import com.github.javaparser.ast.type.Type;
import com.github.javaparser.resolution.types.ResolvedType;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The static type of an expression, as a simple name. Declared types of locals, parameters and
 * fields are read from the tree; anything else goes to the symbol solver, which fails soft: a type
 * it cannot resolve (a library that is not on the scan's classpath) counts as unknown, and the scan
 * goes on by name.
 */
final class Types {

    /**
     * JavaParser's symbol solver as a last resort for an expression whose type is not declared in
     * sight. Off unless {@code -Donce.scan.solver=true}: on a repository of many modules it costs
     * minutes (every lookup walks every source root) and the declared types, imports and the
     * repository's own index resolve what the rules need.
     */
    static final boolean SOLVER = Boolean.getBoolean("once.scan.solver");

    private final Repo repo;

    Types(Repo repo) {
        this.repo = repo;
    }

    /** Simple name of the type of {@code e}, or null when unknown. */
    String typeOf(Expression e) {
        if (e instanceof NameExpr n) {
            Type t = declaredType(n, n.getNameAsString());
            if (t != null) {
                return simple(t);
            }
            if (Character.isUpperCase(n.getNameAsString().charAt(0))) {
                return n.getNameAsString(); // a static call on a type
            }
            return null;
        }
        if (e instanceof FieldAccessExpr fa && fa.getScope() instanceof ThisExpr) {
            Type t = fieldType(enclosingType(fa), fa.getNameAsString(), 0);
            return t == null ? null : simple(t);
        }
        if (e instanceof FieldAccessExpr fa && !(fa.getScope() instanceof ThisExpr)) {
            // another object's field (holder.consumer): the field as its declaring type states it
            String owner = typeOf(fa.getScope());
            if (owner != null && isRepoType(owner)) {
                for (TypeDeclaration<?> t : repo.types(owner, fa)) {
                    Type ft = fieldType(t, fa.getNameAsString(), 0);
                    if (ft != null) {
                        return simple(ft);
                    }
                }
            }
        }
        if (e instanceof ObjectCreationExpr oc) {
            return oc.getType().getNameAsString();
        }
        if (e instanceof ThisExpr) {
            TypeDeclaration<?> t = enclosingType(e);
            return t == null ? null : t.getNameAsString();
        }
        if (e instanceof MethodCallExpr mc) {
            String held = held(mc);
            if (held != null) {
                return held;
            }
            // the receiver's type once: both readings below need it, and asking for it twice per link doubled the work
            // at every link of a fluent chain (a Camel route's hundred steps)
            String receiver = receiverType(mc);
            String declared = returnType(mc, receiver);
            if (declared != null) {
                return declared;
            }
            String made = libraryReturn(mc, receiver);
            if (made != null) {
                return made;
            }
            // a library's singleton accessor (FirebaseMessaging.getInstance(), Foo.getDefaultInstance()) hands out
            // an instance of the type it is called on
            if (mc.getScope().orElse(null) instanceof NameExpr owner
                    && Character.isUpperCase(owner.getNameAsString().charAt(0))
                    && mc.getArguments().size() <= 1
                    && mc.getNameAsString().matches("getInstance|getDefaultInstance|getDefault|instance")) {
                return owner.getNameAsString();
            }
            if (mc.getScope().isEmpty()) {
                return null;
            }
        }
        return solve(e);
    }

    /**
     * What a generic holder hands out: {@code connectionRef.get()} on an {@code AtomicReference<Connection>}, an
     * {@code Optional}'s {@code orElseThrow()}, a {@code Supplier}'s or {@code ObjectProvider}'s {@code get()}: the
     * holder's type argument, as its declaration states it.
     */
    private String held(MethodCallExpr mc) {
        if (!HOLDER_GETS.contains(mc.getNameAsString()) || !(mc.getScope().orElse(null) instanceof NameExpr n)) {
            return null;
        }
        Type t = declaredType(n, n.getNameAsString());
        if (t instanceof ClassOrInterfaceType c
                && HOLDERS.contains(c.getNameAsString())
                && c.getTypeArguments().map(a -> a.size() == 1).orElse(false)) {
            return simple(c.getTypeArguments().get().get(0));
        }
        return null;
    }

    private static final Set<String> HOLDERS = Set.of(
            "AtomicReference",
            "Optional",
            "Supplier",
            "ThreadLocal",
            "ObjectProvider",
            "Provider",
            "CompletableFuture",
            "Future",
            "Mono");

    private static final Set<String> HOLDER_GETS =
            Set.of("get", "getPlain", "getAcquire", "orElseThrow", "getObject", "getIfAvailable", "join", "block");

    /**
     * What a library's factory or fluent call returns, from the return-type catalogue: {@code
     * session.createProducer(queue)} on a JMS {@code Session} is a {@code MessageProducer}, so the {@code send} made on it
     * is a publish. Only on a receiver of a library type (a repository type's methods are read by {@link #returnType}).
     */
    private String libraryReturn(MethodCallExpr mc, String owner) {
        if (mc.getScope().isEmpty() || mc.getScope().get() instanceof ThisExpr) {
            return null;
        }
        if (owner == null || isRepoType(owner)) {
            return null;
        }
        return LibraryReturns.get().returns(owner, mc.getNameAsString()).orElse(null);
    }

    /** The type of the call's receiver: the enclosing type for a call on {@code this} or with no scope. */
    private String receiverType(MethodCallExpr mc) {
        if (mc.getScope().isEmpty() || mc.getScope().get() instanceof ThisExpr) {
            TypeDeclaration<?> t = enclosingType(mc);
            return t == null ? null : t.getNameAsString();
        }
        return typeOf(mc.getScope().get());
    }

    /** The declared return type of a repository method the call lands on: {@code settings.consumer()} → its type. */
    private String returnType(MethodCallExpr mc, String owner) {
        if (owner == null || !isRepoType(owner)) {
            return null;
        }
        for (MethodDeclaration m :
                repo.methods(owner, mc.getNameAsString(), mc.getArguments().size(), mc)) {
            if (!m.getType().isVoidType()) {
                return simple(m.getType());
            }
        }
        for (TypeDeclaration<?> t : repo.types(owner)) {
            if (t instanceof com.github.javaparser.ast.body.RecordDeclaration r
                    && mc.getArguments().isEmpty()) {
                for (Parameter p : r.getParameters()) {
                    if (p.getNameAsString().equals(mc.getNameAsString())) {
                        return simple(p.getType());
                    }
                }
            }
        }
        return null;
    }

    private String solve(Expression e) {
        if (!SOLVER) {
            return null;
        }
        try {
            ResolvedType t = e.calculateResolvedType();
            if (t.isReferenceType()) {
                String q = t.asReferenceType().getQualifiedName();
                return q.substring(q.lastIndexOf('.') + 1);
            }
            return null;
        } catch (RuntimeException | StackOverflowError ex) {
            repo.unresolved++;
            return null;
        }
    }

    static String simple(Type t) {
        if (t instanceof ClassOrInterfaceType c) {
            return c.getNameAsString();
        }
        String s = t.asString();
        int lt = s.indexOf('<');
        return lt >= 0 ? s.substring(0, lt) : s;
    }

    /** The declared type of a name visible at {@code at}: local, parameter, lambda parameter, field. */
    Type declaredType(Node at, String name) {
        Node prev = at;
        for (Node n = at.getParentNode().orElse(null);
                n != null;
                prev = n, n = n.getParentNode().orElse(null)) {
            if (n instanceof com.github.javaparser.ast.stmt.BlockStmt b) {
                for (com.github.javaparser.ast.stmt.Statement s : b.getStatements()) {
                    if (s == prev) {
                        break;
                    }
                    // the statement's own declarations only (its children): a walk of each earlier statement's
                    // whole subtree per look-up cost a long method its size again at every name
                    for (Node child : s.getChildNodes()) {
                        if (!(child instanceof VariableDeclarationExpr v)) {
                            continue;
                        }
                        for (VariableDeclarator d : v.getVariables()) {
                            if (d.getNameAsString().equals(name)) {
                                return varType(d);
                            }
                        }
                    }
                }
            } else if (n instanceof ForEachStmt fe) {
                for (VariableDeclarator d : fe.getVariable().getVariables()) {
                    if (d.getNameAsString().equals(name)) {
                        return d.getType();
                    }
                }
            } else if (n instanceof com.github.javaparser.ast.stmt.ForStmt fs) {
                for (Expression init : fs.getInitialization()) {
                    if (init instanceof VariableDeclarationExpr v) {
                        for (VariableDeclarator d : v.getVariables()) {
                            if (d.getNameAsString().equals(name)) {
                                return varType(d);
                            }
                        }
                    }
                }
            } else if (n instanceof TryStmt ts) {
                for (Expression r : ts.getResources()) {
                    if (r instanceof VariableDeclarationExpr v) {
                        for (VariableDeclarator d : v.getVariables()) {
                            if (d.getNameAsString().equals(name)) {
                                return varType(d);
                            }
                        }
                    }
                }
            } else if (n instanceof CatchClause cc
                    && cc.getParameter().getNameAsString().equals(name)) {
                return cc.getParameter().getType();
            } else if (n instanceof LambdaExpr l) {
                for (int i = 0; i < l.getParameters().size(); i++) {
                    Parameter p = l.getParameter(i);
                    if (p.getNameAsString().equals(name)) {
                        // an inferred parameter given the elements of a declared collection: its element type
                        if (!(p.getType() instanceof com.github.javaparser.ast.type.UnknownType)) {
                            return p.getType();
                        }
                        Type element = Elements.parameter(this, l, i);
                        return element != null ? element : libraryLambdaParameter(l, i);
                    }
                }
            } else if (n instanceof CallableDeclaration<?> m) {
                for (Parameter p : m.getParameters()) {
                    if (p.getNameAsString().equals(name)) {
                        return p.getType();
                    }
                }
            } else if (n instanceof TypeDeclaration<?> t) {
                Type f = fieldType(t, name, 0);
                if (f != null) {
                    return f;
                }
            }
        }
        return null;
    }

    /**
     * The type a library call gives to parameter {@code index} of the lambda passed to it, from the lambda-parameter
     * catalogue ({@code Flux.create(emitter -> …)}: a {@code FluxSink}). The call is made on a library type: a static
     * factory named by its type ({@code Flux.create}), or a receiver of a library type; a repository method of the same
     * name ({@code create(emitter -> …)} with no receiver, or on a repository type) is read from its code instead.
     */
    private Type libraryLambdaParameter(LambdaExpr l, int index) {
        if (!(l.getParentNode().orElse(null) instanceof MethodCallExpr call)
                || call.getScope().isEmpty()
                || !LibraryLambdas.get().names(call.getNameAsString())
                || call.getArguments().stream().noneMatch(a -> a == l)) {
            return null;
        }
        Expression scope = call.getScope().get();
        String owner = scope instanceof NameExpr n
                        && Character.isUpperCase(n.getNameAsString().charAt(0))
                        && declaredType(n, n.getNameAsString()) == null
                ? n.getNameAsString()
                : typeOf(scope);
        if (owner == null || isRepoType(owner)) {
            return null;
        }
        return LibraryLambdas.get()
                .parameter(owner, call.getNameAsString(), index)
                .map(type -> (Type) new ClassOrInterfaceType(null, type))
                .orElse(null);
    }

    private Type varType(VariableDeclarator d) {
        // `var` parses as a class named var where the parser's language level predates it
        if (d.getType().isVarType() || d.getType().asString().equals("var")) {
            Expression init = d.getInitializer().orElse(null);
            if (init instanceof ObjectCreationExpr oc) {
                return oc.getType();
            }
            // `var consumer = this.consumer(ctx)`: the type the repository method that builds it declares
            String built = init instanceof MethodCallExpr mc ? returnType(mc, receiverType(mc)) : null;
            return built == null ? null : new ClassOrInterfaceType(null, built);
        }
        return d.getType();
    }

    /** A field of the type or of its repository superclasses. */
    Type fieldType(TypeDeclaration<?> t, String name, int depth) {
        if (t == null || depth > 4) {
            return null;
        }
        for (FieldDeclaration f : t.getFields()) {
            for (VariableDeclarator v : f.getVariables()) {
                if (v.getNameAsString().equals(name)) {
                    return v.getType();
                }
            }
        }
        if (t instanceof com.github.javaparser.ast.body.RecordDeclaration r) {
            for (Parameter p : r.getParameters()) {
                if (p.getNameAsString().equals(name)) {
                    return p.getType();
                }
            }
        }
        if (t instanceof ClassOrInterfaceDeclaration c) {
            for (ClassOrInterfaceType st : c.getExtendedTypes()) {
                for (TypeDeclaration<?> s : repo.types(st.getNameAsString())) {
                    Type ft = fieldType(s, name, depth + 1);
                    if (ft != null) {
                        return ft;
                    }
                }
            }
        }
        return null;
    }

    /** The nearest ancestor of a type (JavaParser's own findAncestor takes generic varargs, which javac flags). */
    static <T extends Node> Optional<T> ancestor(Node n, Class<T> type) {
        for (Node p = n.getParentNode().orElse(null);
                p != null;
                p = p.getParentNode().orElse(null)) {
            if (type.isInstance(p)) {
                return Optional.of(type.cast(p));
            }
        }
        return Optional.empty();
    }

    static TypeDeclaration<?> enclosingType(Node n) {
        return Types.ancestor(n, TypeDeclaration.class).orElse(null);
    }

    static boolean annotated(List<AnnotationExpr> anns, String... names) {
        for (AnnotationExpr a : anns) {
            for (String n : names) {
                if (a.getNameAsString().equals(n) || a.getNameAsString().endsWith("." + n)) {
                    return true;
                }
            }
        }
        return false;
    }

    static Optional<AnnotationExpr> annotation(List<AnnotationExpr> anns, String name) {
        for (AnnotationExpr a : anns) {
            if (a.getNameAsString().equals(name) || a.getNameAsString().endsWith("." + name)) {
                return Optional.of(a);
            }
        }
        return Optional.empty();
    }

    /** First type argument of a repository interface's Spring Data supertype: the entity. */
    String entityOfRepository(String repoType) {
        for (TypeDeclaration<?> t : repo.types(repoType)) {
            if (t instanceof ClassOrInterfaceDeclaration c) {
                for (ClassOrInterfaceType st : c.getExtendedTypes()) {
                    if (st.getNameAsString().endsWith("Repository")
                            && st.getTypeArguments().isPresent()
                            && !st.getTypeArguments().get().isEmpty()) {
                        return simple(st.getTypeArguments().get().get(0));
                    }
                }
            }
        }
        return null;
    }

    /** True if the type is a Spring Data repository interface declared in the repository. */
    boolean isSpringDataRepository(String typeName) {
        return entityOfRepository(typeName) != null;
    }

    /** True for a type declared in the repository. */
    boolean isRepoType(String typeName) {
        return typeName != null && !repo.types(typeName).isEmpty();
    }

    static boolean isTransactional(MethodDeclaration m) {
        if (annotated(m.getAnnotations(), "Transactional")) {
            return !annotation(m.getAnnotations(), "Transactional")
                    .map(a -> a.toString().contains("NOT_SUPPORTED")
                            || a.toString().contains("NEVER"))
                    .orElse(false);
        }
        TypeDeclaration<?> t = enclosingType(m);
        return t != null && annotated(t.getAnnotations(), "Transactional") && m.isPublic();
    }
}
