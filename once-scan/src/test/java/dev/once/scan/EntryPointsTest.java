package dev.once.scan;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Entry points the fixture sidecars cannot show, because nothing on them is worth a finding. */
class EntryPointsTest {

    @Test
    void aKafkaStreamsTopologyWithNoCallbacksIsAnEntryPoint() {
        ScanReport r = Fixtures.scan(Fixtures.of("streams-topology-source"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Kafka Streams topology @ src/main/java/acme/totals/TotalsTopology.java:18",
                        "Kafka Streams topology @ src/main/java/acme/totals/TotalsTopology.java:24");
        assertThat(r.findings()).isEmpty();
    }

    @Test
    void connectTasksShareLoopsEventBridgeMapsAndHeldDeliverCallbacksAreEntryPointsAndTheirLookAlikesAreNot() {
        var listed = java.util.stream.Stream.of(
                        "kafka-connect-tasks",
                        "kafka-poll-var-and-share-consumer",
                        "lambda-eventbridge-map-handler",
                        "rabbit-deliver-callback-held")
                .flatMap(f -> Fixtures.scan(Fixtures.of(f)).consumers().stream())
                .map(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .toList();

        // not listed: the project's own SinkTask subclass, the Map handler reading no EventBridge envelope, the poll
        // on a deque a repository method returns, the cancel lambda after an unfollowed handler reference
        assertThat(listed)
                .containsExactlyInAnyOrder(
                        "Kafka Connect SinkTask.put @ ShipmentSinkTask.java:22",
                        "Kafka Connect SourceTask.poll @ ClaimSourceTask.java:25",
                        "KafkaConsumer.poll loop @ ConsumeTask.java:30",
                        "ShareConsumer.poll loop @ ShareConsumeTask.java:30",
                        "Lambda RequestHandler<Map> (EventBridge event) @ BillingEventHandler.java:11",
                        "Lambda handler(event source batch) @ ChangeStreamHandler.java:12",
                        "Lambda handler(EventBridge event) @ TenantEvents.java:11",
                        // a callback held in a variable is located from its declaration to the basicConsume call
                        "RabbitMQ basicConsume @ OrderTrigger.java:19",
                        "RabbitMQ basicConsume @ RefundConsumer.java:12");
    }

    @Test
    void documentedListenerFormsAreEntryPointsAndTheirLookAlikesAreNot() {
        var listed = java.util.stream.Stream.of(
                        "listener-meta-annotation",
                        "handler-through-project-base",
                        "camel-route-forms",
                        "entry-catalogue-documented-clients",
                        "documented-receiver-forms")
                .flatMap(f -> Fixtures.scan(Fixtures.of(f)).consumers().stream())
                .map(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .toList();

        // not listed: the method under @Timed (a project annotation over no listener), CarrierLookup (the base bound to
        // an API Gateway request), NightlyJob (a base implementing Runnable), the placeholder resolving to direct: and
        // the endpoint DSL's timer, the activator on errorChannel, a stream handler reading no queue or stream event
        assertThat(listed)
                .containsExactlyInAnyOrder(
                        "@KafkaListener @ InvoiceProjection.java:19",
                        "@RabbitListener @ InvoiceProjection.java:24",
                        "@JmsListener @ InvoiceProjection.java:29",
                        "MessageListener.onMessage @ DispatchListener.java:14",
                        "Lambda RequestHandler<SQSEvent> @ LabelPrinter.java:15",
                        "Kafka Streams Processor.process @ DeliveryProcessor.java:14",
                        "Camel route from(activemq:…) @ OrderRoutes.java:16",
                        "Camel route from(activemq:…) @ OrderRoutes.java:19",
                        "Camel route from(kafka:…) @ OrderRoutes.java:22",
                        "Camel route from(kafka:…) @ StreamRoutes.java:10",
                        "Camel route from(aws2-kinesis:…) @ StreamRoutes.java:12",
                        "Camel route from(azure-eventhubs:…) @ ReturnRoutes.java:7",
                        "Camel route from(rabbitmq:…) @ RefundRouteConfig.java:12",
                        "NATS MessageHandler.onMessage @ PointsHandler.java:16",
                        "RabbitMQ Consumer.handleDelivery @ TierConsumer.java:22",
                        "Pulsar ConsumerBuilder.messageListener @ ClientsStarter.java:32",
                        "Event Hubs EventProcessorClient.processEvent @ ClientsStarter.java:44",
                        "Azure Storage QueueClient.receiveMessages @ ClientsStarter.java:54",
                        "Debezium engine notifying @ ClientsStarter.java:64",
                        "Micronaut @Subscription @ OfferSubscriber.java:16",
                        "Kinesis getRecords loop @ VisitStream.java:22",
                        "Azure Service Bus IMessageHandler.onMessageAsync @ ReferralHandler.java:18",
                        "RabbitMQ Stream consumer messageHandler @ BadgeStream.java:20",
                        "Spring Cloud Stream PollableMessageSource.poll @ ExpiryPoller.java:20",
                        "@KafkaListener @ ListingListener.java:19",
                        "@DltHandler @ ListingListener.java:25",
                        "reactor-kafka KafkaReceiver.receiveAutoAck @ PriceFeed.java:18",
                        "Vert.x RabbitMQConsumer.handler @ ReviewVerticle.java:23",
                        "Spring Cloud GCP PubSubTemplate.subscribe @ StockSubscriber.java:18",
                        "Azure ServiceBusProcessorClient.processMessage @ Discontinuations.java:17",
                        "Lambda RequestStreamHandler (SQSEvent) @ ImportFunction.java:22",
                        "Spring Cloud Stream @ServiceActivator @ LegacySink.java:19");
    }

    @Test
    void pullingConsumersChannelStreamsAndAdaptersTheFrameworksDocumentAreEntryPointsAndTheirLookAlikesAreNot() {
        var listed = java.util.stream.Stream.of(
                        "documented-pull-forms",
                        "smallrye-channel-streams",
                        "sqs-message-mapping",
                        "documented-adapter-forms")
                .flatMap(f -> Fixtures.scan(Fixtures.of(f)).consumers().stream())
                .map(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .toList();

        // not listed: the receiveBody on a file: endpoint, KafkaIO.write, the loop over ReplayBuffer.next() (records
        // kept in memory), the in-memory "ticks" channel and the "alerts" Emitter, the STOMP @MessageMapping in the
        // WebSocket module, the flow from Files.inboundAdapter, the function taking Message<String>; the priming
        // receive before PaymentPoller's loop is the same consumer as the loop's
        assertThat(listed)
                .containsExactlyInAnyOrder(
                        "Camel ConsumerTemplate.receiveBody(activemq:…) @ TransferDrain.java:17",
                        "Camel PollingConsumer.receive(jms:…) @ PaymentPoller.java:26",
                        "Pulsar Consumer.batchReceive loop @ AuditReader.java:22",
                        "Pulsar Reader.readNext loop @ AuditReader.java:33",
                        "Beam PubsubIO read @ LedgerPipeline.java:13",
                        "Beam KafkaIO read @ LedgerPipeline.java:19",
                        "KafkaConsumer.poll loop @ RateSource.java:16",
                        "Kafka record handler pull loop @ RateWorker.java:20",
                        "SmallRye @Channel Multi stream @ QuoteFeed.java:10",
                        "SmallRye @Channel Multi stream @ TradeStream.java:14",
                        "Spring Cloud AWS @MessageMapping (SQS) @ InvoiceHandler.java:18",
                        "Spring Integration flow from Jms.messageDrivenChannelAdapter @ ShipmentFlows.java:22",
                        "Spring Cloud Function Function<SQSEvent> on Lambda @ LabelFunctions.java:18",
                        "Cloud Functions RawBackgroundFunction.accept @ TrackingFunction.java:10");
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
    void handlersOfTheEntryCatalogueAreEntryPointsWithTheAcknowledgementItNames() {
        ScanReport r = Fixtures.scan(Fixtures.of("entry-catalogue-clients"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Camunda ExternalTaskHandler.execute @ ChargeCardHandler.java:20",
                        "Camunda external task handler @ Workers.java:11",
                        "Paho MqttCallback.messageArrived @ MeterReadings.java:19",
                        "Azure ServiceBusProcessorClient.processMessage @ InvoiceMailer.java:21",
                        "Redis Streams StreamListener.onMessage @ RefundStream.java:18",
                        "Lambda handler(SQSEvent) @ UsageHandler.java:15",
                        "Cloud Functions BackgroundFunction.accept @ UsageFunction.java:15",
                        "Azure Functions @ServiceBusQueueTrigger @ InvoiceFunction.java:16");
    }

    @Test
    void aLambdaTypedByItsBeanFieldOrFlowIsAnEntryPoint() {
        ScanReport r = Fixtures.scan(Fixtures.of("entry-handler-beans"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file().replaceAll(".*/", "") + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Camunda ExternalTaskHandler.execute @ HandlerConfiguration.java:15",
                        "Camunda ExternalTaskHandler.execute @ RejectionHandler.java:8",
                        "Spring Integration flow from ServiceBusInboundChannelAdapter @ InboundFlows.java:19",
                        "Pulsar Function.process @ ScoreFunction.java:8");
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
    void twoRoutesSetUpInOneMethodAreTwoConsumersEachWithItsOwnFindings() {
        ScanReport r = Fixtures.scan(Fixtures.of("camel-mqtt-route"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().line())
                .containsExactlyInAnyOrder(
                        "Camel route from(paho-mqtt5:…) @ 10", "Camel route from(paho-mqtt5:…) @ 14");
        // findings are listed under the consumer whose id they carry: two routes of one configure() must not share it
        assertThat(r.consumers()).extracting(Consumer::id).doesNotHaveDuplicates();
    }

    @Test
    void aConnectionKeptInAGenericHolderTypesTheCallMadeOnIt() {
        ScanReport r = Fixtures.scan(Fixtures.of("nats-connection-in-holder"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactly("NATS subscription @ src/main/java/acme/search/MovieIndexer.java:17");
        assertThat(r.findings()).isEmpty();
    }

    @Test
    void twoPullsFromDifferentReceiversInOneMethodAreTwoConsumers() {
        ScanReport r = Fixtures.scan(Fixtures.of("rocketmq-two-templates"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().line())
                .containsExactlyInAnyOrder("RocketMQTemplate.receive @ 20", "RocketMQTemplate.receive @ 23");
        assertThat(r.consumers()).extracting(Consumer::id).doesNotHaveDuplicates();
        assertThat(r.findings()).isEmpty();
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
    void zeebeJobHandlersGivenToANewWorkerAreEntryPoints() {
        ScanReport r = Fixtures.scan(Fixtures.of("zeebe-job-handler"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Zeebe JobHandler @ src/main/java/acme/review/ReceiptHandler.java:17",
                        "Zeebe JobHandler @ src/main/java/acme/review/Workers.java:12",
                        "Zeebe JobHandler @ src/main/java/acme/review/Workers.java:20",
                        "Zeebe @JobWorker @ src/main/java/acme/review/ReviewStarter.java:18",
                        "Zeebe @JobWorker @ src/main/java/acme/review/ReviewStarter.java:25");
    }

    @Test
    void camelRoutesWrittenInXmlOrYamlFromABrokerAreEntryPoints() {
        ScanReport r = Fixtures.scan(Fixtures.of("camel-xml-yaml-routes"));

        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactlyInAnyOrder(
                        "Camel route from(kafka:…) @ src/main/resources/camel/orders-context.xml:9",
                        "Camel route from(jms:…) @ src/main/resources/camel/invoices.xml:3",
                        "Camel route from(kafka:…) @ src/main/resources/camel/refunds.camel.yaml:3");
        assertThat(r.findings()).isEmpty();
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

    @Test
    void aListenerAnnotationOnAMethodOfAnAnonymousBeanIsAnEntryPoint() {
        ScanReport r = Fixtures.scan(Fixtures.of("rabbit-listener-in-anonymous-bean"));

        // Spring reads @RabbitListener off the bean's class, and a @Bean may return an anonymous subclass
        assertThat(r.consumers())
                .extracting(c -> c.kind() + " @ " + c.location().file() + ":"
                        + c.location().line())
                .containsExactly("@RabbitListener @ src/main/java/acme/orders/AmqpConfig.java:17");
        assertThat(r.findings()).isEmpty();
    }
}
