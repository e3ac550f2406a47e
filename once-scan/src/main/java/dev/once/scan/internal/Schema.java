package dev.once.scan.internal;

import com.github.javaparser.ast.body.ClassOrInterfaceDeclaration;
import com.github.javaparser.ast.body.FieldDeclaration;
import com.github.javaparser.ast.body.MethodDeclaration;
import com.github.javaparser.ast.expr.AnnotationExpr;
import com.github.javaparser.ast.expr.MemberValuePair;
import com.github.javaparser.ast.expr.NormalAnnotationExpr;
import com.github.javaparser.ast.expr.SingleMemberAnnotationExpr;
import com.github.javaparser.ast.expr.StringLiteralExpr;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * What the repository's schema says about uniqueness: from Flyway/Liquibase SQL files, JPA
 * {@code @Table(uniqueConstraints)}/{@code @Column(unique = true)}/assigned {@code @Id}, and the SQL
 * of MyBatis mappers (XML or {@code @Insert}/{@code @Update} annotations) so a call to a mapper
 * method can be read as the statement it runs.
 */
final class Schema {

    private static final Pattern CREATE = Pattern.compile(
            "create\\s+table\\s+(?:if\\s+not\\s+exists\\s+)?([\\w.\"`]+)\\s*\\((.*?)\\)\\s*(?:engine[^;]*)?;",
            Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
    private static final Pattern UNIQUE_INDEX = Pattern.compile(
            "create\\s+unique\\s+index\\s+(?:concurrently\\s+)?(?:if\\s+not\\s+exists\\s+)?[\\w\"`]*\\s*on\\s+([\\w.\"`]+)",
            Pattern.CASE_INSENSITIVE);
    private static final Pattern INDEX_COLUMNS =
            Pattern.compile("\\s*(?:using\\s+\\w+\\s*)?\\(([^)]*)\\)", Pattern.CASE_INSENSITIVE);
    private static final Pattern ALTER_UNIQUE = Pattern.compile(
            "alter\\s+table\\s+([\\w.\"`]+)[^;]*?(unique|primary\\s+key)", Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
    private static final Pattern MAPPER_NS = Pattern.compile("<mapper\\s+namespace=\"([\\w.$]+)\"");
    private static final Pattern MAPPER_STMT =
            Pattern.compile("<(insert|update|delete|select)\\s+id=\"(\\w+)\"[^>]*>(.*?)</\\1>", Pattern.DOTALL);

    /** Table (lower case, unquoted, no schema) → has a unique key other than a generated surrogate id. */
    private final Map<String, Boolean> businessKey = new HashMap<>();
    /**
     * Table → has a unique key besides a single-column primary key (a unique constraint or index, a
     * composite key, a natural id): a row keyed by a fresh random id still collides on it.
     */
    private final Map<String, Boolean> otherKey = new HashMap<>();
    /** Table → the columns a unique key or index holds, alone or with others (lower case, unquoted). */
    private final Map<String, java.util.Set<String>> uniqueColumns = new HashMap<>();
    /** Entity class simple name → its fields' names → their column names (lower case). */
    private final Map<String, Map<String, String>> entityColumns = new HashMap<>();
    /** Entity class simple name → the fields and columns it declares unique (@Id, @Column(unique), @NaturalId, @Table). */
    private final Map<String, java.util.Set<String>> entityUnique = new HashMap<>();
    /** Entity class simple name → table name. */
    private final Map<String, String> entityTable = new HashMap<>();
    /** "MapperSimpleName.method" → SQL. */
    private final Map<String, String> mapperSql = new HashMap<>();

    Schema(Repo repo) {
        this.constants = new Constants(repo);
        for (Path f : repo.otherFiles) {
            String n = f.getFileName().toString();
            try {
                if (n.endsWith(".sql")) {
                    readSql(Files.readString(f, StandardCharsets.UTF_8));
                } else if (n.endsWith(".xml")) {
                    String xml = Files.readString(f, StandardCharsets.UTF_8);
                    Matcher ns = MAPPER_NS.matcher(xml);
                    if (ns.find()) {
                        String mapper = simple(ns.group(1));
                        Matcher st = MAPPER_STMT.matcher(xml);
                        while (st.find()) {
                            mapperSql.put(
                                    mapper + "." + st.group(2), st.group(3).replaceAll("<[^>]+>", " "));
                        }
                    } else if (xml.contains("<createTable") || xml.contains("<addUniqueConstraint")) {
                        readLiquibase(xml);
                    }
                }
            } catch (IOException | RuntimeException e) {
                // unreadable schema files are skipped
            }
        }
        for (Repo.Source s : repo.sources()) {
            for (ClassOrInterfaceDeclaration c : s.cu().findAll(ClassOrInterfaceDeclaration.class)) {
                if (c.isAnnotationPresent("Entity") || c.isAnnotationPresent("Table")) {
                    readEntity(c);
                }
                annotatedSql(c);
            }
        }
        this.repo = repo;
    }

    private final Repo repo;
    private final Constants constants;
    /** Mapper types whose annotated SQL has been read (a mapper is parsed only when a trace reaches it). */
    private final java.util.Set<String> annotatedRead = new java.util.HashSet<>();

    private void annotatedSql(ClassOrInterfaceDeclaration c) {
        for (MethodDeclaration m : c.getMethods()) {
            // MyBatis and Spring Data name the statement's kind; JDBI's SQL objects say @SqlUpdate / @SqlQuery
            for (String a : new String[] {"Insert", "Update", "Delete", "Query", "SqlUpdate", "SqlQuery", "SqlBatch"}) {
                m.getAnnotationByName(a).flatMap(this::sqlOf).ifPresent(sql -> {
                    String key = c.getNameAsString() + "." + m.getNameAsString();
                    mapperSql.putIfAbsent(key, sql);
                    mapperAnnotation.putIfAbsent(key, m.getAnnotationByName(a).get());
                });
            }
        }
    }

    /**
     * The SQL an annotation holds: its literal text, or the constants it names read where they are declared
     * ({@code @Query(Queries.INSERT_ORDER)}, a statically imported constant of another module's queries class).
     */
    private Optional<String> sqlOf(AnnotationExpr a) {
        Optional<com.github.javaparser.ast.expr.Expression> value = a instanceof SingleMemberAnnotationExpr s
                ? Optional.of(s.getMemberValue())
                : a instanceof NormalAnnotationExpr n
                        ? n.getPairs().stream()
                                .filter(p -> p.getNameAsString().equals("value"))
                                .map(MemberValuePair::getValue)
                                .findFirst()
                        : Optional.empty();
        if (value.isPresent()
                && value.get()
                        .findFirst(com.github.javaparser.ast.expr.NameExpr.class)
                        .isPresent()) {
            String text = constants.text(value.get(), value.get());
            if (text != null) {
                return Optional.of(text);
            }
        }
        return stringValue(a);
    }

    /** "MapperSimpleName.method" → the annotation its SQL is written in. */
    private final Map<String, AnnotationExpr> mapperAnnotation = new HashMap<>();

    /** The annotation holding a mapper method's SQL, when it is written on the method rather than in XML. */
    Optional<AnnotationExpr> mapperAnnotation(String mapperType, String method) {
        mapperSql(mapperType, method);
        return Optional.ofNullable(mapperAnnotation.get(mapperType + "." + method));
    }

    /** Where annotated SQL can be: a file without one of these annotations holds none for {@link #annotatedSql}. */
    private static final Pattern SQL_ANNOTATION =
            Pattern.compile("\\b(?:Insert|Update|Delete|Query|SqlUpdate|SqlQuery|SqlBatch)\\s*\\(");

    /** The SQL a mapper method runs, if the repository states it (in mapper XML or on the method). */
    Optional<String> mapperSql(String mapperType, String method) {
        String sql = mapperSql.get(mapperType + "." + method);
        if (sql == null && annotatedRead.add(mapperType)) {
            // a MyBatis/Spring Data interface holds no word that gets it parsed up front: read it now
            for (var t :
                    repo.types(mapperType, text -> SQL_ANNOTATION.matcher(text).find())) {
                if (t instanceof ClassOrInterfaceDeclaration c) {
                    annotatedSql(c);
                }
            }
            sql = mapperSql.get(mapperType + "." + method);
        }
        return Optional.ofNullable(sql);
    }

    /** True, false, or empty when the schema does not say. */
    Optional<Boolean> hasBusinessKey(String table) {
        return Optional.ofNullable(businessKey.get(table(table)));
    }

    /** The table of an entity class, if it is one. */
    Optional<String> tableOfEntity(String entity) {
        return Optional.ofNullable(entityTable.get(entity));
    }

    static String table(String t) {
        String s = t.replace("\"", "").replace("`", "").toLowerCase(Locale.ROOT);
        int dot = s.lastIndexOf('.');
        return dot >= 0 ? s.substring(dot + 1) : s;
    }

    private static String simple(String qualified) {
        int dot = qualified.lastIndexOf('.');
        return dot >= 0 ? qualified.substring(dot + 1) : qualified;
    }

    /** The index's column list after {@code from} ({@code USING btree (id)}) names the id column alone. */
    private static boolean onIdOnly(String sql, int from) {
        Matcher cols = INDEX_COLUMNS.matcher(sql).region(from, sql.length());
        return cols.lookingAt() && cols.group(1).strip().replaceAll("[\"`]", "").equalsIgnoreCase("id");
    }

    private void readSql(String sql) {
        String noComments = sql.replaceAll("--[^\n]*", " ");
        Matcher m = CREATE.matcher(noComments);
        while (m.find()) {
            String body = m.group(2).toLowerCase(Locale.ROOT);
            boolean key = body.contains("unique");
            Matcher pk = Pattern.compile("primary\\s+key\\s*\\(([^)]*)\\)").matcher(body);
            if (pk.find()) {
                key |= pk.group(1).contains(",")
                        || !generatedColumn(body, pk.group(1).strip());
            }
            for (String col : body.split(",(?![^(]*\\))")) {
                String c = col.strip();
                if (c.contains("primary key") && !c.startsWith("primary key") && !c.startsWith("constraint")) {
                    key |= !isGenerated(c);
                }
            }
            businessKey.merge(table(m.group(1)), key, Boolean::logicalOr);
            uniqueIn(table(m.group(1)), body);
            boolean composite = pk.find(0) && pk.group(1).contains(",");
            otherKey.merge(table(m.group(1)), body.contains("unique") || composite, Boolean::logicalOr);
        }
        Matcher u = UNIQUE_INDEX.matcher(noComments);
        while (u.find()) {
            if (onIdOnly(noComments, u.end())) {
                continue; // a unique index restating the surrogate id is no business key
            }
            businessKey.put(table(u.group(1)), true);
            otherKey.put(table(u.group(1)), true);
            Matcher cols = INDEX_COLUMNS.matcher(noComments).region(u.end(), noComments.length());
            if (cols.lookingAt()) {
                unique(table(u.group(1)), cols.group(1));
            }
        }
        Matcher a = ALTER_UNIQUE.matcher(noComments);
        while (a.find()) {
            businessKey.put(table(a.group(1)), true);
            otherKey.put(table(a.group(1)), true);
            Matcher cols = INDEX_COLUMNS.matcher(noComments).region(a.end(), noComments.length());
            if (cols.lookingAt()) {
                unique(table(a.group(1)), cols.group(1));
            }
        }
    }

    private static final Pattern UNIQUE_LIST =
            Pattern.compile("(?:unique|primary\\s+key)\\s*(?:key\\s*|index\\s*)?(?:[\\w\"`]+\\s*)?\\(([^)]*)\\)");

    /** The columns a CREATE TABLE body makes unique: by a column constraint or a table constraint's list. */
    private void uniqueIn(String table, String body) {
        uniqueColumns.computeIfAbsent(table, t -> new java.util.HashSet<>());
        Matcher l = UNIQUE_LIST.matcher(body);
        while (l.find()) {
            unique(table, l.group(1));
        }
        for (String col : body.split(",(?![^(]*\\))")) {
            String c = col.strip();
            if (!c.startsWith("unique")
                    && !c.startsWith("constraint")
                    && !c.startsWith("primary")
                    && c.matches("(?s)[\\w\"`]+\\s.*\\b(unique|primary\\s+key)\\b.*")) {
                unique(table, c.split("\\s+")[0]);
            }
        }
    }

    private void unique(String table, String columnList) {
        for (String c : columnList.split(",")) {
            uniqueColumns
                    .computeIfAbsent(table, t -> new java.util.HashSet<>())
                    .add(c.strip().replaceAll("[\"`]", "").toLowerCase(Locale.ROOT));
        }
    }

    /**
     * Whether a lookup by these properties of an entity ({@code findByQid}: qid) is backed by a unique key: true when
     * one of them is the @Id, is declared unique on the entity or in the repository's SQL (alone or in a composite
     * key: conservative), false when the entity declares them and nothing makes any unique, empty when the entity
     * or a property is not in sight.
     */
    Optional<Boolean> uniqueProperties(String entity, List<String> properties) {
        Map<String, String> columns = entityColumns.get(entity);
        if (columns == null || properties.isEmpty()) {
            return Optional.empty();
        }
        java.util.Set<String> declared = entityUnique.getOrDefault(entity, java.util.Set.of());
        java.util.Set<String> sql = uniqueColumns.getOrDefault(entityTable.get(entity), java.util.Set.of());
        for (String p : properties) {
            String column = columns.get(p);
            if (column == null) {
                return Optional.empty();
            }
            if (declared.contains(p) || declared.contains(column) || sql.contains(column)) {
                return Optional.of(true);
            }
        }
        return Optional.of(false);
    }

    private static String snake(String camel) {
        return camel.replaceAll("([a-z0-9])([A-Z])", "$1_$2").toLowerCase(Locale.ROOT);
    }

    private static boolean generatedColumn(String body, String column) {
        for (String col : body.split(",")) {
            String c = col.strip();
            if (c.startsWith(column + " ") || c.startsWith("\"" + column + "\"")) {
                return isGenerated(c);
            }
        }
        return false;
    }

    private static boolean isGenerated(String columnDef) {
        String c = columnDef.toLowerCase(Locale.ROOT);
        return c.contains("serial")
                || c.contains("identity")
                || c.contains("auto_increment")
                || c.contains("nextval")
                || c.contains("gen_random_uuid")
                || c.contains("uuid_generate");
    }

    private void readLiquibase(String xml) {
        Matcher t = Pattern.compile("<createTable[^>]*tableName=\"(\\w+)\"(.*?)</createTable>", Pattern.DOTALL)
                .matcher(xml);
        while (t.find()) {
            String body = t.group(2);
            boolean key = body.contains("unique=\"true\"")
                    || (body.contains("primaryKey=\"true\"") && !body.contains("autoIncrement=\"true\""));
            businessKey.merge(table(t.group(1)), key, Boolean::logicalOr);
            otherKey.merge(table(t.group(1)), body.contains("unique=\"true\""), Boolean::logicalOr);
        }
        Matcher u =
                Pattern.compile("<addUniqueConstraint[^>]*tableName=\"(\\w+)\"").matcher(xml);
        while (u.find()) {
            businessKey.put(table(u.group(1)), true);
            otherKey.put(table(u.group(1)), true);
            Matcher cols = Pattern.compile("columnNames=\"([^\"]*)\"").matcher(xml);
            int end = xml.indexOf('>', u.start());
            if (cols.region(u.start(), end < 0 ? xml.length() : end).find()) {
                unique(table(u.group(1)), cols.group(1));
            }
        }
        Matcher c = Pattern.compile("<column[^>]*name=\"(\\w+)\"[^>]*>\\s*<constraints[^>]*unique=\"true\"")
                .matcher(xml);
        while (c.find()) {
            // the table is the createTable around it
            Matcher t2 =
                    Pattern.compile("<createTable[^>]*tableName=\"(\\w+)\"").matcher(xml.substring(0, c.start()));
            String table = null;
            while (t2.find()) {
                table = t2.group(1);
            }
            if (table != null) {
                unique(table(table), c.group(1));
            }
        }
    }

    private void readEntity(ClassOrInterfaceDeclaration c) {
        String table =
                c.getAnnotationByName("Table").flatMap(a -> member(a, "name")).orElse(c.getNameAsString());
        entityTable.put(c.getNameAsString(), table(table));
        boolean key = c.getAnnotationByName("Table")
                .map(a -> a.toString().contains("uniqueConstraints"))
                .orElse(false);
        boolean other = key;
        Map<String, String> columns = new HashMap<>();
        java.util.Set<String> unique = new java.util.HashSet<>();
        c.getAnnotationByName("Table").ifPresent(a -> {
            // @UniqueConstraint(columnNames = {"a", "b"}) and @Index(columnList = "a, b", unique = true)
            for (AnnotationExpr inner : a.findAll(AnnotationExpr.class)) {
                String text = inner.toString().replace(" ", "");
                if (inner.getNameAsString().equals("UniqueConstraint")
                        || inner.getNameAsString().equals("Index") && text.contains("unique=true")) {
                    for (String v : concat(text).split("[,\\s]+")) {
                        if (!v.isBlank()) {
                            unique.add(v.toLowerCase(Locale.ROOT));
                        }
                    }
                }
            }
        });
        for (FieldDeclaration f : c.getFields()) {
            for (var v : f.getVariables()) {
                String column = f.getAnnotationByName("Column")
                        .flatMap(a -> member(a, "name"))
                        .map(n -> n.strip().toLowerCase(Locale.ROOT))
                        .orElse(snake(v.getNameAsString()));
                columns.put(v.getNameAsString(), column);
                if (f.isAnnotationPresent("Id")
                        || f.isAnnotationPresent("NaturalId")
                        || f.getAnnotationByName("Column")
                                .map(a -> a.toString().replace(" ", "").contains("unique=true"))
                                .orElse(false)) {
                    unique.add(v.getNameAsString());
                    unique.add(column);
                }
            }
            if (f.getAnnotationByName("Column")
                            .map(a -> a.toString().replace(" ", "").contains("unique=true"))
                            .orElse(false)
                    || f.isAnnotationPresent("NaturalId")) {
                key = true;
                other = true;
            }
            if (f.isAnnotationPresent("Id") && !f.isAnnotationPresent("GeneratedValue")) {
                key = true;
            }
        }
        businessKey.merge(table(table), key, Boolean::logicalOr);
        otherKey.merge(table(table), other || c.isAnnotationPresent("IdClass"), Boolean::logicalOr);
        entityColumns.put(c.getNameAsString(), columns);
        entityUnique.put(c.getNameAsString(), unique);
    }

    /** Whether the table has a unique key besides a single-column primary key (false when the schema does not say). */
    boolean hasKeyBesidesId(String table) {
        return otherKey.getOrDefault(table(table), false);
    }

    static Optional<String> stringValue(AnnotationExpr a) {
        if (a instanceof SingleMemberAnnotationExpr s) {
            return Optional.of(concat(s.getMemberValue().toString()));
        }
        return member(a, "value");
    }

    static Optional<String> member(AnnotationExpr a, String name) {
        if (a instanceof NormalAnnotationExpr n) {
            for (MemberValuePair p : n.getPairs()) {
                if (p.getNameAsString().equals(name)) {
                    return Optional.of(
                            p.getValue() instanceof StringLiteralExpr s
                                    ? s.getValue()
                                    : concat(p.getValue().toString()));
                }
            }
        }
        if (a instanceof SingleMemberAnnotationExpr s && name.equals("value")) {
            return Optional.of(concat(s.getMemberValue().toString()));
        }
        return Optional.empty();
    }

    // Possessive, so a long literal (a query of thousands of characters) is read in a loop: the
    // backtracking form recursed once per character and overflowed the stack.
    private static final Pattern LITERAL = Pattern.compile("\"((?:[^\"\\\\]++|\\\\.)*+)\"");

    /** The text of string literals and their concatenations, quotes removed. */
    static String concat(String expr) {
        StringBuilder b = new StringBuilder();
        Matcher m = LITERAL.matcher(expr);
        while (m.find()) {
            b.append(m.group(1)).append(' ');
        }
        return b.length() == 0 ? expr : b.toString();
    }
}
