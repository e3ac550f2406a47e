package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class ClientFailuresTest {

    @Test
    void catalogueTypesReportTheirCategoryOnly() {
        ClientFailures c = ClientFailures.get();
        assertThat(c.reports("RestClientException", Event.Category.EXTERNAL, "calls RestTemplate POST"))
                .isTrue();
        assertThat(c.reports("RestClientException", Event.Category.DATABASE, "inserts into t"))
                .isFalse();
        assertThat(c.reports("AmazonServiceException", Event.Category.PUBLISH, "sends an SQS message"))
                .isTrue();
    }

    @Test
    void anExceptionNamedAfterTheClientOfTheWriteIsItsFailure() {
        assertThat(ClientFailures.namedAfterClient(
                        "InnReachException", "calls HTTP interface InnReachClient POSTINNREACHAPI (…)"))
                .isTrue();
        // a word inside another name, a general stem, a name that is no exception: not the client's failure
        assertThat(ClientFailures.namedAfterClient("ReachException", "calls HTTP interface InnReachClient POST"))
                .isFalse();
        assertThat(ClientFailures.namedAfterClient("HttpException", "calls HTTP interface HttpBinClient POST"))
                .isFalse();
        assertThat(ClientFailures.namedAfterClient("LedgerError", "calls Feign LedgerClient POSTENTRY"))
                .isFalse();
        assertThat(ClientFailures.namedAfterClient("LedgerException", "calls Feign Ledger POSTENTRY"))
                .isFalse();
    }

    /** Odd names and descriptions (empty, the stem alone, at the very end, a capital missing) are answered. */
    @Test
    void oddNamesAreAnswered() {
        for (String type : List.of("", "E", "Exception", "XException", "LedgerException", "ledgerException")) {
            for (String what : List.of("", "Ledger", "a Ledger", "Ledgerx", "xLedgerClient", "Ledger Client")) {
                ClientFailures.get().reports(type, Event.Category.EXTERNAL, what);
                assertThat(ClientFailures.namedAfterClient(type, what))
                        .as(type + " / " + what)
                        .isFalse();
            }
        }
    }

    @Test
    void aBadLineIsNamed() {
        assertThatThrownBy(() -> ClientFailures.parse(List.of("RestClientException | HTTP | x"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("'HTTP'");
        assertThatThrownBy(() -> ClientFailures.parse(List.of("rest.Exception | ANY | x"), "t.txt"))
                .hasMessageContaining("simple class name");
    }
}
