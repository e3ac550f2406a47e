/**
 * The once command: demo, schema, doctor, prune, scan. An application, not a library: it exports
 * nothing. It ships as one shaded jar on the class path ({@code once.jar}); the descriptor keeps what
 * it uses of the other modules to their exported API.
 */
module dev.once.cli {
    requires dev.once.core;
    requires dev.once.http;
    requires dev.once.scan;
    requires dev.once.testkit;
    requires com.fasterxml.jackson.databind;
    requires com.zaxxer.hikari;
    requires info.picocli;
    requires io.javalin;
    requires kafka.clients;
    requires software.amazon.awssdk.services.sqs;
    requires org.mariadb.jdbc; // the drivers the commands connect with, by URL
    requires org.postgresql.jdbc;

    // picocli sets the commands' options and reads their version provider reflectively
    opens dev.once.cli to
            info.picocli;
    opens dev.once.cli.internal to
            info.picocli; // and creates its option converters (Durations)
    opens dev.once.cli.demo to
            info.picocli,
            com.fasterxml.jackson.databind; // and Jackson writes DemoState
    opens dev.once.cli.demo.web; // the demo's page, served by Javalin from the class path
}
