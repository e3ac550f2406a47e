package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** Entry points the fixture sidecars cannot show, because nothing on them is worth a finding. */
class EntryPointsTest {

    static final boolean NO_FINDINGS = true;
    static final boolean ANY_FINDINGS = false;

    /**
     * One row of the table: fixtures scanned one by one, the entry points they list together ({@code kind @ file:line},
     * the file as the scan reports it, from its fixture's root; nothing else, in any order), and whether they must
     * report no finding. The comment above a row names the look-alikes its fixtures hold, which must not be listed.
     */
    record Listed(String what, List<String> fixtures, boolean noFindings, List<String> entryPoints) {
        @Override
        public String toString() {
            return what;
        }
    }

    static Stream<Listed> listed() {
        return Stream.of(
                new Listed(
                        "a Kafka Streams topology with no callbacks",
                        List.of("streams-topology-source"),
                        NO_FINDINGS,
                        List.of(
                                "Kafka Streams topology @ src/main/java/acme/totals/TotalsTopology.java:18",
                                "Kafka Streams topology @ src/main/java/acme/totals/TotalsTopology.java:24")),
                // not listed: the project's own SinkTask subclass, the Map handler reading no EventBridge envelope, the
                // poll on a deque a repository method returns, the cancel lambda after an unfollowed handler reference
                new Listed(
                        "Kafka Connect tasks, share-group and var-held poll loops, EventBridge Map handlers, held DeliverCallbacks",
                        List.of(
                                "kafka-connect-tasks",
                                "kafka-poll-var-and-share-consumer",
                                "lambda-eventbridge-map-handler",
                                "rabbit-deliver-callback-held"),
                        ANY_FINDINGS,
                        List.of(
                                "Kafka Connect SinkTask.put @ src/main/java/acme/connect/ShipmentSinkTask.java:22",
                                "Kafka Connect SourceTask.poll @ src/main/java/acme/connect/ClaimSourceTask.java:25",
                                "KafkaConsumer.poll loop @ src/main/java/acme/tasks/ConsumeTask.java:30",
                                "ShareConsumer.poll loop @ src/main/java/acme/tasks/ShareConsumeTask.java:30",
                                "Lambda RequestHandler<Map> (EventBridge event) @ src/main/java/acme/tenants/BillingEventHandler.java:11",
                                "Lambda handler(event source batch) @ src/main/java/acme/tenants/ChangeStreamHandler.java:12",
                                "Lambda handler(EventBridge event) @ src/main/java/acme/tenants/TenantEvents.java:11",
                                // a callback held in a variable is located from its declaration to the basicConsume
                                // call
                                "RabbitMQ basicConsume @ src/main/java/acme/orders/OrderTrigger.java:19",
                                "RabbitMQ basicConsume @ src/main/java/acme/orders/RefundConsumer.java:12")),
                // not listed: the method under @Timed (a project annotation over no listener), CarrierLookup (the base
                // bound to an API Gateway request), NightlyJob (a base implementing Runnable), the placeholder
                // resolving to direct: and the endpoint DSL's timer, the activator on errorChannel, a stream handler
                // reading no queue or stream event
                new Listed(
                        "listener forms the frameworks document",
                        List.of(
                                "listener-meta-annotation",
                                "handler-through-project-base",
                                "camel-route-forms",
                                "entry-catalogue-documented-clients",
                                "documented-receiver-forms"),
                        ANY_FINDINGS,
                        List.of(
                                "@KafkaListener @ src/main/java/acme/billing/invoices/InvoiceProjection.java:19",
                                "@RabbitListener @ src/main/java/acme/billing/invoices/InvoiceProjection.java:24",
                                "@JmsListener @ src/main/java/acme/billing/invoices/InvoiceProjection.java:29",
                                "MessageListener.onMessage @ src/main/java/acme/shipping/DispatchListener.java:14",
                                "Lambda RequestHandler<SQSEvent> @ src/main/java/acme/shipping/LabelPrinter.java:15",
                                "Kafka Streams Processor.process @ src/main/java/acme/shipping/DeliveryProcessor.java:14",
                                "Camel route from(activemq:…) @ src/main/java/acme/orders/routes/OrderRoutes.java:16",
                                "Camel route from(activemq:…) @ src/main/java/acme/orders/routes/OrderRoutes.java:19",
                                "Camel route from(kafka:…) @ src/main/java/acme/orders/routes/OrderRoutes.java:22",
                                "Camel route from(kafka:…) @ src/main/java/acme/orders/routes/StreamRoutes.java:10",
                                "Camel route from(aws2-kinesis:…) @ src/main/java/acme/orders/routes/StreamRoutes.java:12",
                                "Camel route from(azure-eventhubs:…) @ src/main/java/acme/orders/routes/ReturnRoutes.java:7",
                                "Camel route from(rabbitmq:…) @ src/main/java/acme/orders/routes/RefundRouteConfig.java:12",
                                "NATS MessageHandler.onMessage @ src/main/java/acme/loyalty/PointsHandler.java:16",
                                "RabbitMQ Consumer.handleDelivery @ src/main/java/acme/loyalty/TierConsumer.java:22",
                                "Pulsar ConsumerBuilder.messageListener @ src/main/java/acme/loyalty/ClientsStarter.java:32",
                                "Event Hubs EventProcessorClient.processEvent @ src/main/java/acme/loyalty/ClientsStarter.java:44",
                                "Azure Storage QueueClient.receiveMessages @ src/main/java/acme/loyalty/ClientsStarter.java:54",
                                "Debezium engine notifying @ src/main/java/acme/loyalty/ClientsStarter.java:64",
                                "Micronaut @Subscription @ src/main/java/acme/loyalty/OfferSubscriber.java:16",
                                "Kinesis getRecords loop @ src/main/java/acme/loyalty/VisitStream.java:22",
                                "Azure Service Bus IMessageHandler.onMessageAsync @ src/main/java/acme/loyalty/ReferralHandler.java:18",
                                "RabbitMQ Stream consumer messageHandler @ src/main/java/acme/loyalty/BadgeStream.java:20",
                                "Spring Cloud Stream PollableMessageSource.poll @ src/main/java/acme/loyalty/ExpiryPoller.java:20",
                                "@KafkaListener @ src/main/java/acme/catalog/ListingListener.java:19",
                                "@DltHandler @ src/main/java/acme/catalog/ListingListener.java:25",
                                "reactor-kafka KafkaReceiver.receiveAutoAck @ src/main/java/acme/catalog/PriceFeed.java:18",
                                "Vert.x RabbitMQConsumer.handler @ src/main/java/acme/catalog/ReviewVerticle.java:23",
                                "Spring Cloud GCP PubSubTemplate.subscribe @ src/main/java/acme/catalog/StockSubscriber.java:18",
                                "Azure ServiceBusProcessorClient.processMessage @ src/main/java/acme/catalog/Discontinuations.java:17",
                                "Lambda RequestStreamHandler (SQSEvent) @ src/main/java/acme/catalog/ImportFunction.java:22",
                                "Spring Cloud Stream @ServiceActivator @ src/main/java/acme/catalog/LegacySink.java:19")),
                // not listed: the receiveBody on a file: endpoint, KafkaIO.write, the loop over ReplayBuffer.next()
                // (records kept in memory), the in-memory "ticks" channel and the "alerts" Emitter, the STOMP
                // @MessageMapping in the WebSocket module, the flow from Files.inboundAdapter, the function taking
                // Message<String>; the priming receive before PaymentPoller's loop is the same consumer as the loop's
                new Listed(
                        "pulling consumers, channel streams and adapters the frameworks document",
                        List.of(
                                "documented-pull-forms",
                                "smallrye-channel-streams",
                                "sqs-message-mapping",
                                "documented-adapter-forms"),
                        ANY_FINDINGS,
                        List.of(
                                "Camel ConsumerTemplate.receiveBody(activemq:…) @ src/main/java/acme/ledger/TransferDrain.java:17",
                                "Camel PollingConsumer.receive(jms:…) @ src/main/java/acme/ledger/PaymentPoller.java:26",
                                "Pulsar Consumer.batchReceive loop @ src/main/java/acme/ledger/AuditReader.java:22",
                                "Pulsar Reader.readNext loop @ src/main/java/acme/ledger/AuditReader.java:33",
                                "Beam PubsubIO read @ src/main/java/acme/ledger/LedgerPipeline.java:13",
                                "Beam KafkaIO read @ src/main/java/acme/ledger/LedgerPipeline.java:19",
                                "KafkaConsumer.poll loop @ src/main/java/acme/ledger/RateSource.java:16",
                                "Kafka record handler pull loop @ src/main/java/acme/ledger/RateWorker.java:20",
                                "SmallRye @Channel Multi stream @ src/main/java/acme/quotes/QuoteFeed.java:10",
                                "SmallRye @Channel Multi stream @ src/main/java/acme/quotes/TradeStream.java:14",
                                "Spring Cloud AWS @MessageMapping (SQS) @ billing/src/main/java/acme/billing/InvoiceHandler.java:18",
                                "Spring Integration flow from Jms.messageDrivenChannelAdapter @ src/main/java/acme/ship/ShipmentFlows.java:22",
                                "Spring Cloud Function Function<SQSEvent> on Lambda @ src/main/java/acme/ship/LabelFunctions.java:18",
                                "Cloud Functions RawBackgroundFunction.accept @ src/main/java/acme/ship/TrackingFunction.java:10")),
                // not listed: the in-memory queue drained into a transaction committed on another object, the rows of
                // the project's own table fetched and deleted through its DAO, Hibernate's get/delete, an iterator
                new Listed(
                        "a loop pulling from a client and settling on it or on what it returned",
                        List.of("pull-loop-settled-on-its-client"),
                        ANY_FINDINGS,
                        List.of(
                                "CanalConnector.getWithoutAck pull loop @ src/main/java/com/kestrelmart/pricing/PriceBinlogSync.java:27",
                                "TaskQueueClient.pullTasks pull loop @ src/main/java/com/kestrelmart/pricing/RebateWorker.java:24",
                                "InboxReceiver.receive pull loop @ src/main/java/com/kestrelmart/pricing/ShelfLabelPrinter.java:22",
                                "CostFeed.fetchNext pull loop @ src/main/java/com/kestrelmart/pricing/CostImporter.java:20")),
                new Listed(
                        "handlers of the entry catalogue",
                        List.of("entry-catalogue-clients"),
                        ANY_FINDINGS,
                        List.of(
                                "Camunda ExternalTaskHandler.execute @ src/main/java/acme/billing/ChargeCardHandler.java:20",
                                "Camunda external task handler @ src/main/java/acme/billing/Workers.java:11",
                                "Paho MqttCallback.messageArrived @ src/main/java/acme/billing/MeterReadings.java:19",
                                "Azure ServiceBusProcessorClient.processMessage @ src/main/java/acme/billing/InvoiceMailer.java:21",
                                "Redis Streams StreamListener.onMessage @ src/main/java/acme/billing/RefundStream.java:18",
                                "Lambda handler(SQSEvent) @ src/main/java/acme/billing/UsageHandler.java:15",
                                "Cloud Functions BackgroundFunction.accept @ src/main/java/acme/billing/UsageFunction.java:15",
                                "Azure Functions @ServiceBusQueueTrigger @ src/main/java/acme/billing/InvoiceFunction.java:16")),
                new Listed(
                        "a lambda typed by its bean, field or flow",
                        List.of("entry-handler-beans"),
                        ANY_FINDINGS,
                        List.of(
                                "Camunda ExternalTaskHandler.execute @ src/main/java/acme/loans/HandlerConfiguration.java:15",
                                "Camunda ExternalTaskHandler.execute @ src/main/java/acme/loans/RejectionHandler.java:8",
                                "Spring Integration flow from ServiceBusInboundChannelAdapter @ src/main/java/acme/loans/InboundFlows.java:19",
                                "Pulsar Function.process @ src/main/java/acme/loans/ScoreFunction.java:8")),
                new Listed(
                        "two routes set up in one method are two consumers",
                        List.of("camel-mqtt-route"),
                        ANY_FINDINGS,
                        List.of(
                                "Camel route from(paho-mqtt5:…) @ src/main/java/acme/sensors/ReadingRoute.java:10",
                                "Camel route from(paho-mqtt5:…) @ src/main/java/acme/sensors/ReadingRoute.java:14")),
                new Listed(
                        "a connection kept in a generic holder types the call made on it",
                        List.of("nats-connection-in-holder"),
                        NO_FINDINGS,
                        List.of("NATS subscription @ src/main/java/acme/search/MovieIndexer.java:17")),
                new Listed(
                        "two pulls from different receivers in one method are two consumers",
                        List.of("rocketmq-two-templates"),
                        NO_FINDINGS,
                        List.of(
                                "RocketMQTemplate.receive @ src/main/java/acme/pull/PullBoth.java:20",
                                "RocketMQTemplate.receive @ src/main/java/acme/pull/PullBoth.java:23")),
                new Listed(
                        "Zeebe job handlers given to a new worker",
                        List.of("zeebe-job-handler"),
                        ANY_FINDINGS,
                        List.of(
                                "Zeebe JobHandler @ src/main/java/acme/review/ReceiptHandler.java:17",
                                "Zeebe JobHandler @ src/main/java/acme/review/Workers.java:12",
                                "Zeebe JobHandler @ src/main/java/acme/review/Workers.java:20",
                                "Zeebe @JobWorker @ src/main/java/acme/review/ReviewStarter.java:18",
                                "Zeebe @JobWorker @ src/main/java/acme/review/ReviewStarter.java:25")),
                new Listed(
                        "Zeebe job handlers given to a helper that passes its parameter on to a new worker",
                        List.of("zeebe-worker-helper-parameter"),
                        ANY_FINDINGS,
                        List.of(
                                "Zeebe JobHandler @ src/main/java/acme/payout/PayoutWorker.java:17",
                                "Zeebe JobHandler @ src/main/java/acme/payout/PayoutWorker.java:22",
                                "Zeebe JobHandler @ src/main/java/acme/payout/RefundWorker.java:19")),
                new Listed(
                        "Camel routes written in XML or YAML from a broker",
                        List.of("camel-xml-yaml-routes"),
                        NO_FINDINGS,
                        List.of(
                                "Camel route from(kafka:…) @ src/main/resources/camel/orders-context.xml:9",
                                "Camel route from(jms:…) @ src/main/resources/camel/invoices.xml:3",
                                "Camel route from(kafka:…) @ src/main/resources/camel/refunds.camel.yaml:3")),
                // Spring reads @RabbitListener off the bean's class, and a @Bean may return an anonymous subclass
                new Listed(
                        "a listener annotation on a method of an anonymous bean",
                        List.of("rabbit-listener-in-anonymous-bean"),
                        NO_FINDINGS,
                        List.of("@RabbitListener @ src/main/java/acme/orders/AmqpConfig.java:17")),
                // not listed: the seda: route and the helper's timer: call (no broker), the helper's own from(uri), and
                // the factory's onMessage that only passes the message on to the project's QueueListener
                new Listed(
                        "JMS destination-form URIs, a route helper's callers, a listener's delegated implementations",
                        List.of(
                                "camel-jms-destination-form",
                                "camel-route-helper-uri",
                                "jms-listener-delegates-to-project-handler"),
                        ANY_FINDINGS,
                        List.of(
                                "Camel route from(corpmq:…) @ src/main/java/acme/loans/LoanRoutes.java:13",
                                "Camel route from(corpmq:…) @ src/main/java/acme/loans/LoanRoutes.java:17",
                                // listed at the calls that name the queues
                                "Camel route from(activemq:…) built by addInsertRoute @ src/main/java/acme/holds/HoldRoutes.java:12",
                                "Camel route from(activemq:…) built by addInsertRoute @ src/main/java/acme/holds/HoldRoutes.java:13",
                                "MessageListener.onMessage through QueueListener.setListener @ src/main/java/acme/stages/DecisionStage.java:18",
                                "MessageListener.onMessage through QueueListener.setListener @ src/main/java/acme/stages/AuditListener.java:18")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("listed")
    void theFixturesEntryPointsAreListedAndNothingElse(Listed row) {
        List<String> listed = new ArrayList<>();
        for (String fixture : row.fixtures()) {
            ScanReport r = Fixtures.scan(Fixtures.of(fixture));
            r.consumers()
                    .forEach(c -> listed.add(c.kind() + " @ " + c.location().file() + ":"
                            + c.location().line()));
            // findings are listed under the consumer whose id they carry: two consumers must not share one
            assertThat(r.consumers())
                    .as("ids of %s", fixture)
                    .extracting(Consumer::id)
                    .doesNotHaveDuplicates();
            if (row.noFindings()) {
                assertThat(r.findings()).as("findings of %s", fixture).isEmpty();
            }
        }
        assertThat(listed).containsExactlyInAnyOrderElementsOf(row.entryPoints());
    }

    @Test
    void consumerKindsOfClientsNeitherCorpusHalfHoldsAreEntryPointsAndTheirPublishersAreNot() {
        ScanReport r = Fixtures.scan(Fixtures.of("entry-catalogue-world-clients"));

        // not listed: the Paho publish, the XADD, the MQ put, and the Flink sink
        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Paho subscribe listener @ MqttIngest.java:15",
                        "HiveMQ subscribe callback @ MqttIngest.java:24",
                        "Redis Streams container receiveAutoAck @ FuelStream.java:28",
                        "Redis XREADGROUP loop @ FuelStream.java:33",
                        "RocketMQ 5 PushConsumer listener @ DispatchReceivers.java:23",
                        "RocketMQ 5 SimpleConsumer.receive @ DispatchReceivers.java:32",
                        "Artemis ClientConsumer.setMessageHandler @ DispatchReceivers.java:42",
                        "IBM MQ MQQueue.get loop @ DepotQueue.java:22",
                        "Flink KafkaSource @ SpeedingJob.java:23",
                        "Alpakka Kafka committableSource @ SpeedingJob.java:34");
    }

    @Test
    void changeFeedTriggersDebeziumSinksAndSolaceReceiversAreEntryPointsFromTheCatalogue() {
        ScanReport r = Fixtures.scan(Fixtures.of("entry-catalogue-change-feeds"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Azure Functions @CosmosDBTrigger @ LedgerFeedFunction.java:14",
                        "Debezium Server sink handle @ WarehouseSink.java:20",
                        "Debezium Server sink handle @ LedgerTopicSink.java:21",
                        "Debezium engine ChangeConsumer.handleBatch @ SearchIndexSink.java:12",
                        "Debezium @Capturing @ AuditCapture.java:17",
                        "Solace PersistentMessageReceiver.receiveMessage @ TransferQueueReader.java:25");
    }

    @Test
    void listenersConfiguredInSpringXmlAreEntryPointsAtTheirJavaMethods() {
        ScanReport r = Fixtures.scan(Fixtures.of("xml-configured-listeners"));

        // not listed: FormArchive.store, on a file adapter's channel and on an in-memory one
        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Spring XML <jms:listener> CLAIMS.IN → ClaimIntake.receiveClaim @ ClaimIntake.java:14",
                        "Spring XML <rabbit:listener> claims.status → StatusBoard.onStatus @ StatusBoard.java:14",
                        "Spring XML <service-activator> on payoutRequests → PayoutService.pay @ PayoutService.java:14",
                        "MessageListener.onMessage @ FraudScreen.java:16");
    }

    @Test
    void aHandlerHeldInAVariableIsLocatedFromItsDeclarationToItsRegistration() {
        ScanReport r = Fixtures.scan(Fixtures.of("handler-held-in-variable"));

        // a reader points at the receiver's declaration or at the call that registers it, ten lines apart
        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line() + "-" + c.location().endLine())
                .containsExactlyInAnyOrder(
                        "Pub/Sub Subscriber MessageReceiver @ AlertSubscriber.java:21-31",
                        "NATS JetStream push subscription @ PagerDispatch.java:23-27");
    }

    @Test
    void aHandlerMethodIsLocatedFromItsAnnotationsToItsName() {
        ScanReport r = Fixtures.scan(Fixtures.of("kafka-listener-multiline-annotation"));

        // a reader may point at the @KafkaListener line or at the method's name, five lines apart
        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file() + ":"
                        + c.location().line() + "-" + c.location().endLine())
                .containsExactly("@KafkaListener @ src/main/java/acme/audit/AuditListener.java:12-17");
    }

    @Test
    void aReceiveInAHelperIsLocatedAtTheReceiveAndTracedFromItsCaller() {
        ScanReport r = Fixtures.scan(Fixtures.of("sqs-receive-in-helper"));

        assertThat(r.consumers())
                .extracting(
                        c -> c.kind() + " " + c.name() + " @ " + c.location().line())
                .contains("SQS receiveMessage QueueDrain.handleRequest @ 25");
    }

    @Test
    void eachSubclassOfTheProjectsOwnAbstractConsumerIsAConsumerWithItsOwnSettings() {
        ScanReport r = Fixtures.scan(Fixtures.of("kafka-abstract-poll-loop"));

        // the loop is PollingConsumer's; the consumers are its concrete subclasses, listed at their handle
        assertThat(r.consumers())
                .extracting(c -> c.name() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "InvoiceMailer.handle @ src/main/java/acme/billing/InvoiceMailer.java:18",
                        "AuditTrail.handle @ src/main/java/acme/billing/AuditTrail.java:13");
        // each is configured by what it passes to super(…), not by the module's first enable.auto.commit
        assertThat(r.consumers())
                .filteredOn(c -> c.name().startsWith("AuditTrail"))
                .extracting(Consumer::ack)
                .singleElement()
                .asString()
                .contains("enable.auto.commit=true");
        assertThat(r.consumers())
                .filteredOn(c -> c.name().startsWith("InvoiceMailer"))
                .extracting(Consumer::ack)
                .singleElement()
                .asString()
                .doesNotContain("enable.auto.commit=true");
        // the mail is the mailer's finding, and the audit trail's loop does not carry it
        String mailer = r.consumers().stream()
                .filter(c -> c.name().startsWith("InvoiceMailer"))
                .findFirst()
                .orElseThrow()
                .id();
        assertThat(r.findings()).extracting(Finding::consumer).containsOnly(mailer);
    }

    @Test
    void anAbstractWorkerWhosePoolCallsTheSubclassIsOneConsumerPerSubclass() {
        ScanReport r = Fixtures.scan(Fixtures.of("sqs-abstract-worker-pool"));

        // fetch() receives, a pool task calls process(m), which calls the abstract handle(m) and deletes m
        assertThat(r.consumers())
                .extracting(c -> c.name() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "RefundWorker.handle @ src/main/java/acme/refunds/RefundWorker.java:17",
                        "AuditWorker.handle @ src/main/java/acme/refunds/AuditWorker.java:13");
    }
}
