package dev.once.bench;

import dev.once.ClaimTiming;
import dev.once.Delivery;
import dev.once.IdempotentConsumer;
import dev.once.Outcome;
import io.eventuate.common.jdbc.EventuateSchema;
import io.eventuate.common.jdbc.sqldialect.PostgresDialect;
import io.eventuate.common.spring.jdbc.EventuateSpringJdbcStatementExecutor;
import io.eventuate.common.spring.jdbc.EventuateSpringTransactionTemplate;
import io.eventuate.tram.consumer.jdbc.SqlTableBasedDuplicateMessageDetector;
import io.eventuate.tram.messaging.common.Message;
import io.eventuate.tram.messaging.common.MessageImpl;
import io.eventuate.tram.messaging.common.SubscriberIdAndMessage;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.apache.camel.processor.idempotent.jdbc.JdbcMessageIdRepository;
import org.springframework.aop.framework.ProxyFactory;
import org.springframework.integration.channel.NullChannel;
import org.springframework.integration.handler.advice.IdempotentReceiverInterceptor;
import org.springframework.integration.jdbc.metadata.JdbcMetadataStore;
import org.springframework.integration.selector.MetadataStoreSelector;
import org.springframework.integration.support.MessageBuilder;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.messaging.MessageHandler;
import org.springframework.transaction.support.TransactionTemplate;

/** {@code once} and the three peers of issue 7, each as a {@link Subject.Kind}. */
final class Subjects {

    /** The consumer / processor name every subject scopes its dedupe records by. */
    static final String CONSUMER = "ledger";

    private Subjects() {}

    static List<Subject.Kind> all() {
        return List.of(
                once(ClaimTiming.BEFORE_HANDLER),
                once(ClaimTiming.AT_COMMIT),
                camel(),
                eventuate(),
                springIntegration());
    }

    static Subject.Kind byName(String name) {
        return all().stream()
                .filter(k -> k.name().equals(name))
                .findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no subject named '" + name + "', expected one of "
                        + all().stream().map(Subject.Kind::name).toList()));
    }

    private static void execute(DataSource ds, String... statements) throws SQLException {
        try (Connection c = ds.getConnection();
                Statement s = c.createStatement()) {
            for (String sql : statements) {
                s.execute(sql);
            }
        }
    }

    // ---------------------------------------------------------------- once

    /** The name of once's subject with {@code timing}: {@code once} claims first (the default), {@code once-at-commit} not. */
    static String onceName(ClaimTiming timing) {
        return timing == ClaimTiming.AT_COMMIT ? "once-at-commit" : "once";
    }

    static Subject.Kind once(ClaimTiming timing) {
        return new Subject.Kind() {
            @Override
            public String name() {
                return onceName(timing);
            }

            @Override
            public String description() {
                if (timing == ClaimTiming.AT_COMMIT) {
                    return "`once` with `claimTiming(ClaimTiming.AT_COMMIT)`: the handler first, then the claim as a"
                            + " plain insert in the COMMIT's round trip (two round trips per event); per event only.";
                }
                return "`dev.once:once-core` (this build): `IdempotentConsumer.process` per event, `processBatch` of 100"
                        + " when batched (mode `batch`: the per-event handler, one `UPDATE` per event; mode `batch-set`:"
                        + " a `BatchHandler` applying the batch with one `UPDATE … FROM unnest`, pre-aggregated and"
                        + " sorted); claim and effect in one transaction; acknowledge when `Outcome.shouldAcknowledge()`.";
            }

            @Override
            public void createStore(DataSource dataSource) {
                // The once tables are already migrated in every fresh benchmark schema.
            }

            @Override
            public boolean batches() {
                return true;
            }

            @Override
            public Subject open(DataSource dataSource) {
                IdempotentConsumer consumer = IdempotentConsumer.builder()
                        .dataSource(dataSource)
                        .consumer(CONSUMER)
                        .claimTiming(timing)
                        .handler((delivery, tx) -> {
                            Faults.beforeEffect(delivery.eventId());
                            Ledger.ONCE_HANDLER.handle(delivery, tx);
                        })
                        .build();
                return new Subject() {
                    @Override
                    public boolean deliver(Event e) {
                        return consumer.process(Delivery.of(e.id(), e.payload()))
                                .shouldAcknowledge();
                    }

                    @Override
                    public List<Boolean> deliverBatch(List<Event> events) {
                        List<Delivery> deliveries = new ArrayList<>(events.size());
                        for (Event e : events) {
                            deliveries.add(Delivery.of(e.id(), e.payload()));
                        }
                        List<Boolean> acks = new ArrayList<>(events.size());
                        for (Outcome o : consumer.processBatch(deliveries)) {
                            acks.add(o.shouldAcknowledge());
                        }
                        return acks;
                    }
                };
            }
        };
    }

    // ---------------------------------------------------------------- Apache Camel

    /**
     * Camel's JDBC idempotent repository as its idempotent consumer EIP drives it with the default
     * options (eager, removeOnFailure, not transacted): {@code add(key)} commits the key in its own
     * transaction before the route runs, the route's effect commits on its own, {@code remove(key)}
     * if the route fails, {@code confirm(key)} when it completes.
     */
    static Subject.Kind camel() {
        return new Subject.Kind() {
            @Override
            public String name() {
                return "camel";
            }

            @Override
            public String description() {
                return "`" + Versions.of("org.apache.camel", "camel-sql") + "` `JdbcMessageIdRepository`"
                        + " (table CAMEL_MESSAGEPROCESSED,"
                        + " its own `TransactionTemplate`), driven as the `idempotentConsumer` EIP drives it with default"
                        + " options (eager `add` before the route, `remove` on failure, `confirm` on completion; route"
                        + " not transacted); the effect through Spring `JdbcTemplate`. The repository class is used"
                        + " directly, without a CamelContext.";
            }

            @Override
            public void createStore(DataSource dataSource) throws Exception {
                // The repository creates its table itself when it starts (createTableIfNotExists is the default).
                JdbcMessageIdRepository repo = new JdbcMessageIdRepository(dataSource, CONSUMER);
                repo.start();
                repo.stop();
            }

            @Override
            public Subject open(DataSource dataSource) {
                JdbcMessageIdRepository repo = new JdbcMessageIdRepository(dataSource, CONSUMER);
                repo.start();
                JdbcTemplate jdbc = new JdbcTemplate(dataSource);
                return new Subject() {
                    @Override
                    public boolean deliver(Event e) {
                        if (!repo.add(e.id())) {
                            return true; // duplicate: the EIP skips the route and the exchange completes
                        }
                        try {
                            Faults.beforeEffect(e.id());
                            String payload = e.payload();
                            jdbc.update(Ledger.CREDIT, Event.amount(payload), Event.account(payload));
                        } catch (RuntimeException failure) {
                            repo.remove(e.id());
                            throw failure;
                        }
                        repo.confirm(e.id());
                        return true;
                    }

                    @Override
                    public void close() {
                        repo.stop();
                    }
                };
            }
        };
    }

    // ---------------------------------------------------------------- Eventuate Tram

    /**
     * Eventuate Tram's {@code SqlTableBasedDuplicateMessageDetector}, called as its
     * {@code DuplicateDetectingMessageHandlerDecorator} calls it: {@code doWithMessage} runs the
     * insert into {@code received_messages} and the handler in one Spring transaction.
     */
    static Subject.Kind eventuate() {
        return new Subject.Kind() {
            @Override
            public String name() {
                return "eventuate";
            }

            @Override
            public String description() {
                return "`" + Versions.of("io.eventuate.tram.core", "eventuate-tram-consumer-jdbc") + "`"
                        + " `SqlTableBasedDuplicateMessageDetector.doWithMessage` (insert into `received_messages`,"
                        + " duplicate key = duplicate, handler in the same Spring transaction), wired with `"
                        + Versions.of("io.eventuate.common", "eventuate-common-spring-jdbc") + "`'s Spring executor and"
                        + " transaction template as Tram's Spring configuration does; the effect through `JdbcTemplate`. Called as"
                        + " `DuplicateDetectingMessageHandlerDecorator` calls it, without a message broker.";
            }

            @Override
            public void createStore(DataSource dataSource) throws SQLException {
                // Eventuate's PostgreSQL DDL for the table (consumer_id, message_id) is the key.
                execute(
                        dataSource,
                        "CREATE TABLE received_messages (consumer_id varchar(1000) NOT NULL,"
                                + " message_id varchar(1000) NOT NULL, creation_time bigint, published smallint DEFAULT 0,"
                                + " PRIMARY KEY (consumer_id, message_id))");
            }

            @Override
            public Subject open(DataSource dataSource) {
                JdbcTemplate jdbc = new JdbcTemplate(dataSource);
                TransactionTemplate tx = new TransactionTemplate(new DataSourceTransactionManager(dataSource));
                SqlTableBasedDuplicateMessageDetector detector = new SqlTableBasedDuplicateMessageDetector(
                        new EventuateSchema(EventuateSchema.EMPTY_SCHEMA),
                        new PostgresDialect().getCurrentTimeInMillisecondsExpression(),
                        new EventuateSpringJdbcStatementExecutor(jdbc),
                        new EventuateSpringTransactionTemplate(tx));
                return e -> {
                    Message message = new MessageImpl(e.payload(), Map.of(Message.ID, e.id()));
                    detector.doWithMessage(new SubscriberIdAndMessage(CONSUMER, message), () -> {
                        Faults.beforeEffect(message.getId());
                        String payload = message.getPayload();
                        jdbc.update(Ledger.CREDIT, Event.amount(payload), Event.account(payload));
                    });
                    return true;
                };
            }
        };
    }

    // ---------------------------------------------------------------- Spring Integration

    /**
     * Spring Integration's idempotent receiver: an {@code IdempotentReceiverInterceptor} with a
     * {@code MetadataStoreSelector} on a {@code JdbcMetadataStore}, advising the handler's
     * {@code handleMessage}, duplicates discarded. No transaction around the flow, as in the
     * reference manual's example; the key is a producer-assigned header, not the per-instance id.
     */
    static Subject.Kind springIntegration() {
        return new Subject.Kind() {
            @Override
            public String name() {
                return "spring-integration";
            }

            @Override
            public String description() {
                return "`" + Versions.of("org.springframework.integration", "spring-integration-jdbc") + "` (Spring"
                        + " Framework " + Versions.version("spring-framework") + "):"
                        + " `IdempotentReceiverInterceptor(new MetadataStoreSelector(eventId header,"
                        + " new JdbcMetadataStore(dataSource)))` advising a `MessageHandler` through Spring AOP's"
                        + " `ProxyFactory`, discard channel `NullChannel`; no transaction around the flow (the"
                        + " metadata store's insert commits on its own, then the effect); the effect through"
                        + " `JdbcTemplate`. Without an application context.";
            }

            @Override
            public void createStore(DataSource dataSource) throws SQLException {
                // From spring-integration-jdbc's schema-postgresql.sql.
                execute(
                        dataSource,
                        "CREATE TABLE INT_METADATA_STORE (METADATA_KEY varchar(255) NOT NULL,"
                                + " METADATA_VALUE varchar(4000), REGION varchar(100) NOT NULL,"
                                + " CONSTRAINT INT_METADATA_STORE_PK PRIMARY KEY (METADATA_KEY, REGION))");
            }

            @Override
            public Subject open(DataSource dataSource) {
                JdbcTemplate jdbc = new JdbcTemplate(dataSource);
                JdbcMetadataStore store = new JdbcMetadataStore(dataSource);
                store.afterPropertiesSet();
                MetadataStoreSelector selector =
                        new MetadataStoreSelector(m -> m.getHeaders().get("eventId", String.class), store);
                IdempotentReceiverInterceptor interceptor = new IdempotentReceiverInterceptor(selector);
                interceptor.setDiscardChannel(new NullChannel());
                MessageHandler credit = m -> {
                    Faults.beforeEffect(m.getHeaders().get("eventId", String.class));
                    String payload = (String) m.getPayload();
                    jdbc.update(Ledger.CREDIT, Event.amount(payload), Event.account(payload));
                };
                ProxyFactory proxy = new ProxyFactory(credit);
                proxy.addAdvice(interceptor);
                MessageHandler handler = (MessageHandler) proxy.getProxy();
                return e -> {
                    handler.handleMessage(MessageBuilder.withPayload(e.payload())
                            .setHeader("eventId", e.id())
                            .build());
                    return true;
                };
            }
        };
    }
}
