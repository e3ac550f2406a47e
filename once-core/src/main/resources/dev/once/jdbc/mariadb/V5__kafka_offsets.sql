-- once schema, version 5, MariaDB: Kafka offsets kept in the claim transaction (opt-in,
-- KafkaConsumerRunnerBuilder.offsetsInDatabase). The next offset of each partition of a consumer
-- group, written in the same transaction as the batch's claims, so a crash between the database
-- commit and the Kafka commit replays nothing the database committed.
CREATE TABLE IF NOT EXISTS ${prefix}kafka_offsets (
    consumer_group varchar(255) NOT NULL,
    topic          varchar(255) NOT NULL,
    partition_no   integer      NOT NULL,
    next_offset    bigint       NOT NULL,
    PRIMARY KEY (consumer_group, topic, partition_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
