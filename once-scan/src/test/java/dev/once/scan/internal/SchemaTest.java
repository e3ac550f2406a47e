package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

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
}
