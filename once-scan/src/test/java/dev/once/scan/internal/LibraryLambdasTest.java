package dev.once.scan.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

class LibraryLambdasTest {

    @Test
    void theShippedCatalogueTypesAnEmittersLambdaParameter() {
        assertThat(LibraryLambdas.get().parameter("Flux", "create", 0)).contains("FluxSink");
        assertThat(LibraryLambdas.get().parameter("Flowable", "create", 0)).contains("FlowableEmitter");
        // another parameter, or a method no line names, is left untyped
        assertThat(LibraryLambdas.get().parameter("Flux", "create", 1)).isEmpty();
        assertThat(LibraryLambdas.get().parameter("Flux", "map", 0)).isEmpty();
    }

    @Test
    void aBadIndexOrTypeIsNamed() {
        assertThatThrownBy(() -> LibraryLambdas.parse(List.of("Flux | create | first | FluxSink"), "t.txt"))
                .hasMessageContaining("t.txt:1")
                .hasMessageContaining("parameter must be an index");
        assertThatThrownBy(() -> LibraryLambdas.parse(List.of("Flux | create | 0 | reactor.FluxSink"), "t.txt"))
                .hasMessageContaining("type must be a type's simple name");
    }
}
