package dev.once.cli;

import java.io.PrintWriter;
import java.io.StringWriter;

/** Runs the command line in this JVM and keeps what it printed. */
record Cli(int exitCode, String out, String err) {

    static Cli run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Main.run(new PrintWriter(out), new PrintWriter(err), args);
        return new Cli(code, out.toString(), err.toString());
    }

    @Override
    public String toString() {
        return "exit " + exitCode + "\n--- out:\n" + out + "--- err:\n" + err;
    }
}
