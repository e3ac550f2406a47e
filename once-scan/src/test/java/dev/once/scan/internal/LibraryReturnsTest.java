package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class LibraryReturnsTest {

    @Test
    void theShippedCatalogueTypesAFluentChain() {
        assertThat(LibraryReturns.get().returns("Session", "createProducer")).contains("MessageProducer");
        assertThat(LibraryReturns.get().returns("TypedMessageBuilder", "value")).contains("TypedMessageBuilder");
        // a call whose result is data, or a method no line names, is left untyped
        assertThat(LibraryReturns.get().returns("Session", "createTextMessage")).isEmpty();
    }

    @Test
    void aReturnTypeThatIsNotASimpleNameIsNamed() {
        assertThatThrownBy(() -> LibraryReturns.parse(
                        List.of("Session | createProducer | jakarta.jms.MessageProducer"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("returns must be a type's simple name")
                .hasMessageContaining("'jakarta.jms.MessageProducer'");
    }

    @Test
    void aLineOfTheWrongWidthIsNamed() {
        assertThatThrownBy(() -> LibraryReturns.parse(List.of("Session | createProducer"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("expected 3 columns");
    }
}
