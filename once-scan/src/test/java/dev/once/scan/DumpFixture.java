package dev.once.scan;

import org.junit.jupiter.api.Test;

import java.nio.file.Path;

class DumpFixture {
    @Test
    void dump() {
        String root = System.getProperty("root", "..");
        System.out.println(Format.TEXT.render(ConsumerScan.builder().root(Path.of(root)).build().run()));
    }
}
