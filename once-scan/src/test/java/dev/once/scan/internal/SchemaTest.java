package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SchemaTest {

    @Test
    void stringLiteralsAreJoinedWithoutQuotes() {
        assertThat(Schema.concat("\"insert into t \" + \"values (?)\"")).isEqualTo("insert into t  values (?) ");
        assertThat(Schema.concat("\"say \\\"hi\\\"\"")).isEqualTo("say \\\"hi\\\" ");
    }

    // A long @Query text (CZERTAINLY-Core has one of 2,162 characters) once overflowed the stack: the
    // pattern's alternation recursed once per character, and the StackOverflowError ended the scan.
    @Test
    void aVeryLongLiteralIsRead() {
        String sql = "select x from t where a = 'b' ".repeat(20_000);
        assertThat(Schema.concat("\"" + sql + "\"")).isEqualTo(sql + " ");
    }

    // find-or-create is a race only when nothing makes the looked-up column unique: the entity, the SQL and the
    // Liquibase changelog each say it in their own way
    @Test
    void uniqueColumnsAreReadFromEntitiesSqlAndLiquibase(@TempDir Path root) throws IOException {
        Path java = Files.createDirectories(root.resolve("src/main/java/acme"));
        Files.writeString(java.resolve("Link.java"), """
                package acme;
                @Entity
                @Table(name = "link", uniqueConstraints = @UniqueConstraint(columnNames = {"tenant", "code"}))
                public class Link {
                    @Id private String id;
                    @Column(name = "qid") private String qid;
                    @Column(unique = true) private String uac;
                    private String tenant;
                    private String code;
                    private String caseRef;
                    private String email;
                    private String phone;
                }
                """);
        Files.writeString(
                java.resolve("Other.java"),
                "package acme;\n@Entity\npublic class Other { @Id private String id; private String code; private String tag;"
                        + " private String name; private String note; }\n");
        Path sql = Files.createDirectories(root.resolve("src/main/resources/db"));
        Files.writeString(sql.resolve("V1__link.sql"), """
                create table link (id varchar(64) primary key, qid varchar(64), case_ref varchar(64),
                  email varchar(255) unique, phone varchar(32));
                create index link_qid on link (qid);
                create unique index link_case_ref on link (case_ref);
                """);
        Files.writeString(sql.resolve("changelog.xml"), """
                <databaseChangeLog>
                  <changeSet id="1" author="a">
                    <createTable tableName="other">
                      <column name="id" type="varchar(64)"><constraints primaryKey="true"/></column>
                      <column name="code" type="varchar(64)"><constraints unique="true"/></column>
                      <column name="tag" type="varchar(64)"/>
                      <column name="name" type="varchar(64)"/>
                    </createTable>
                    <addUniqueConstraint tableName="other" columnNames="tag"/>
                  </changeSet>
                </databaseChangeLog>
                """);
        Schema schema = new Schema(Repo.load(root));
        assertThat(schema.uniqueProperties("Other", List.of("code"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Other", List.of("tag"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Other", List.of("name"))).isEqualTo(Optional.of(false));
        assertThat(schema.uniqueProperties("Link", List.of("qid"))).isEqualTo(Optional.of(false));
        assertThat(schema.uniqueProperties("Link", List.of("phone"))).isEqualTo(Optional.of(false));
        assertThat(schema.uniqueProperties("Link", List.of("uac"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Link", List.of("code"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Link", List.of("caseRef"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Link", List.of("email"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Link", List.of("id"))).isEqualTo(Optional.of(true));
        assertThat(schema.uniqueProperties("Link", List.of("missing"))).isEmpty();
        assertThat(schema.uniqueProperties("Unknown", List.of("qid"))).isEmpty();
    }
}
