package dev.once.scan;

import org.junit.jupiter.api.Test;

class DumpFixture {
    @Test
    void dump() {
        String name = System.getProperty("fixture", "transactional-self-invocation");
        System.out.println(Format.TEXT.render(Fixtures.scan(Fixtures.of(name))));
    }
}
