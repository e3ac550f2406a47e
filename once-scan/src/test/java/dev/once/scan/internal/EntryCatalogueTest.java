package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class EntryCatalogueTest {

    @Test
    void theShippedCatalogueParses() {
        assertThat(EntryCatalogue.get().names(EntryCatalogue.Shape.IMPLEMENTS, "ExternalTaskHandler"))
                .isTrue();
    }

    @Test
    void anExplicitAcknowledgementMustNameItsCalls() {
        assertThatThrownBy(() -> EntryCatalogue.parse(
                        List.of("implements | Handler | handle | org.acme | acme | EXPLICIT | Acme | why"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("EXPLICIT names the acknowledging calls")
                .hasMessageContaining("'EXPLICIT'");
    }

    @Test
    void anUnknownShapeIsNamed() {
        assertThatThrownBy(() -> EntryCatalogue.parse(
                        List.of("extends | Handler | handle | org.acme | acme | AFTER_RETURN | Acme | why"), "t.txt"))
                .hasMessageContaining(
                        "shape must be annotation, implements, callback, receive, record or failure, not 'extends'");
    }

    @Test
    void aFailureLineNamesTheSettersOfItsErrorHandler() {
        assertThat(EntryCatalogue.get().failures())
                .anyMatch(r ->
                        r.name().equals("KafkaConsumerWrapper") && r.ackCalls().contains("processRecordErrorHandler"));
        assertThatThrownBy(() -> EntryCatalogue.parse(
                        List.of("failure | Wrapper | start | org.acme | kafka | AFTER_RETURN | Handler | why"),
                        "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("UNLESS:processRecordErrorHandler")
                .hasMessageContaining("'AFTER_RETURN'");
    }

    @Test
    void aLineWithTooFewColumnsIsNamed() {
        assertThatThrownBy(() -> EntryCatalogue.parse(List.of("annotation | Topic | - | io.x"), "t.txt"))
                .hasMessageContaining("expected 8 columns")
                .hasMessageContaining("got 4");
    }
}
