package dev.once.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** What the handler's SQL guard refuses and what it lets through, without a database. */
class TransactionSqlTest {

    @ParameterizedTest
    @ValueSource(
            strings = {
                "COMMIT",
                " commit ;",
                "/* a /* nested */ comment */ COMMIT",
                "--x\n  END",
                "# x\nCOMMIT",
                "ROLLBACK",
                "ROLLBACK WORK",
                "rollback prepared 'x'",
                "ABORT",
                "BEGIN",
                "BEGIN WORK",
                "START TRANSACTION",
                "SET TRANSACTION READ ONLY",
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
                "SET autocommit=1",
                "SET @@autocommit = 1",
                "SET @@session.autocommit = 1",
                "set local autocommit on",
                "PREPARE TRANSACTION 'x'",
                "XA START 'x'",
                "SELECT 1; COMMIT",
                "SELECT ';'; COMMIT",
                "SELECT $$;$$; COMMIT",
                "SELECT E'\\';'; COMMIT",
                "SELECT 1 -- ;\n; COMMIT",
                "SELECT \"a;b\" FROM t; commit",
                // Keywords are matched in place, case-insensitively; a word outside ASCII is upper-cased
                // with Locale.ROOT as before (U+017F, long s, upper-cases to S).
                "CoMmIt",
                "rollBACK",
                "Start Transaction",
                "\u017Fet autocommit = 1"
            })
    void transactionControlIsRefusedOnPostgres(String sql) {
        assertThat(TransactionSql.refusal(sql, false)).as(sql).isNotNull();
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "SELECT 1",
                "UPDATE account SET balance = balance + 1",
                "SAVEPOINT a",
                "ROLLBACK TO a",
                "ROLLBACK TO SAVEPOINT a",
                "rollback work to savepoint a",
                "RELEASE SAVEPOINT a",
                "SELECT 'COMMIT'",
                "SELECT 'x; COMMIT'",
                "SELECT $tag$ ; COMMIT $tag$",
                "SELECT $1; SELECT 2",
                "/* COMMIT */ SELECT 1",
                "SELECT 1 -- ; COMMIT",
                "SELECT commit_id FROM t",
                "SET LOCAL lock_timeout = '1s'",
                "SET search_path = x",
                "CREATE TABLE t (id int)",
                "DO $$ BEGIN PERFORM 1; END $$",
                "SELECT 1 # 2",
                "Rollback To a",
                "commitx", // a word that starts with a keyword is not that keyword
                "ENDING",
                "commi", // nor one that a keyword starts with
                "ROLL x",
                ""
            })
    void otherSqlPassesOnPostgres(String sql) {
        assertThat(TransactionSql.refusal(sql, false)).as(sql).isNull();
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "CREATE TABLE t (id int)",
                "drop table t",
                "ALTER TABLE t ADD x int",
                "TRUNCATE t",
                "LOCK TABLES t WRITE",
                "UNLOCK TABLES",
                "RENAME TABLE a TO b",
                "SELECT 'it\\'s'; COMMIT",
                "SELECT \"a\\\";\"; COMMIT",
                "SELECT 1 # ;\n; COMMIT",
                "BEGIN NOT ATOMIC COMMIT; END"
            })
    void implicitCommitsAndMySqlLexingOnMariaDb(String sql) {
        assertThat(TransactionSql.refusal(sql, true)).as(sql).isNotNull();
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "CREATE TEMPORARY TABLE t (id int)",
                "DROP TEMPORARY TABLE t",
                "SELECT 'it\\'s; COMMIT'",
                "SELECT \"x; COMMIT\"",
                "SELECT 1 # ; COMMIT",
                "LOAD DATA LOCAL INFILE 'x' INTO TABLE t"
            })
    void otherSqlPassesOnMariaDb(String sql) {
        assertThat(TransactionSql.refusal(sql, true)).as(sql).isNull();
    }
}
