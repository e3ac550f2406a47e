/**
 * A static scan of a Java repository for message consumers that would not survive a duplicate
 * delivery. {@code dev.once.scan.internal} is the scanner itself and is not exported.
 */
module dev.once.scan {
    requires com.github.javaparser.core;
    requires com.github.javaparser.symbolsolver.core;
    requires com.fasterxml.jackson.databind;
    requires com.fasterxml.jackson.dataformat.yaml;

    exports dev.once.scan;
}
