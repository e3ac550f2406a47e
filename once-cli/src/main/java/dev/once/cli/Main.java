package dev.once.cli;

import dev.once.cli.demo.DemoCommand;
import dev.once.cli.internal.ExitCodes;
import dev.once.cli.internal.Failure;
import java.io.PrintWriter;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code once} command: {@code demo}, {@code schema}, {@code doctor}, {@code prune}, {@code scan}.
 *
 * <p>Exit status: {@value ExitCodes#OK} success, {@value ExitCodes#FINDINGS} a check found a
 * problem ({@code doctor} found duplicate business keys, {@code scan --fail-on} found a finding that serious), {@value ExitCodes#USAGE} bad arguments
 * (unknown option, bad duration), {@value ExitCodes#FAILURE} the operation failed (database
 * unreachable, SQL error).
 */
@Command(
        name = "once",
        mixinStandardHelpOptions = true,
        versionProvider = Main.Version.class,
        description = "Effectively-once processing: claim the event id, apply the effect, commit, then ack.",
        subcommands = {
            DemoCommand.class,
            SchemaCommand.class,
            DoctorCommand.class,
            PruneCommand.class,
            ScanCommand.class,
            CommandLine.HelpCommand.class
        })
public final class Main implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public static void main(String[] args) {
        System.exit(run(new PrintWriter(System.out, true), new PrintWriter(System.err, true), args));
    }

    /** Runs the command line with the given streams and returns the exit status; never calls {@code System.exit}. */
    public static int run(PrintWriter out, PrintWriter err, String... args) {
        CommandLine cl = new CommandLine(new Main());
        cl.setOut(out);
        cl.setErr(err);
        cl.setExecutionExceptionHandler((e, commandLine, parseResult) -> {
            if (e instanceof Failure f) {
                commandLine.getErr().println("once " + commandLine.getCommandName() + ": " + f.getMessage());
                commandLine.getErr().flush();
                return f.exitCode();
            }
            commandLine.getErr().println("once " + commandLine.getCommandName() + ": " + e);
            e.printStackTrace(commandLine.getErr());
            commandLine.getErr().flush();
            return ExitCodes.FAILURE;
        });
        int code = cl.execute(args);
        out.flush();
        err.flush();
        return code;
    }

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }

    /** Reads the version from the jar manifest, if any. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            String v = Main.class.getPackage().getImplementationVersion();
            return new String[] {"once " + (v == null ? "(development build)" : v)};
        }
    }
}
