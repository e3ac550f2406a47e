package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class WorkVerbsTest {

    @Test
    void theShippedCatalogueReadsTheLeadingVerbPastDo() {
        assertThat(WorkVerbs.get().works("doIndex")).isTrue();
        assertThat(WorkVerbs.get().works("process")).isTrue();
        assertThat(WorkVerbs.get().works("triggerBuild")).isTrue();
        // a read, a check, a longer word that starts like a verb, "do" alone: no work handed over
        assertThat(WorkVerbs.get().works("getVocabulary")).isFalse();
        assertThat(WorkVerbs.get().works("canHandle")).isFalse();
        assertThat(WorkVerbs.get().works("processor")).isFalse();
        assertThat(WorkVerbs.get().works("doit")).isFalse();
    }

    /** Odd names (empty, one letter, "do" and nothing after, a capital first) are answered, never an exception. */
    @Test
    void oddNamesAreAnswered() {
        for (String name : List.of("", "d", "do", "doX", "Do", "DoIndex", "PROCESS", "_process", "process1")) {
            boolean works = WorkVerbs.get().works(name);
            // a name whose first letter is not lower case has no verb to read
            if (name.isEmpty() || !Character.isLowerCase(name.charAt(0))) {
                assertThat(works).as(name).isFalse();
            }
        }
    }

    @Test
    void aVerbThatIsNotOneLowerCaseWordIsNamed() {
        assertThatThrownBy(() -> WorkVerbs.parse(List.of("doIndex | indexes"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("one lower-case word")
                .hasMessageContaining("'doIndex'");
    }

    @Test
    void aLineOfTheWrongWidthIsNamed() {
        assertThatThrownBy(() -> WorkVerbs.parse(List.of("process"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("expected 2 columns");
    }
}
