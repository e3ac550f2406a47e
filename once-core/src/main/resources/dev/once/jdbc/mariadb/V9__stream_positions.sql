-- once schema, version 9, MariaDB: the position each ordered stream's consumer has applied up to (an SQS
-- FIFO message group: the sequence number of its last applied message), moved only forward, in the same
-- transaction as the claims. A process that held a message past its visibility timeout while the queue
-- moved it on (a redrive after maxReceiveCount) and handed out its successors cannot apply it after them:
-- its commit finds the stream already past it. SQS sequence numbers are up to 128 bits: decimal(39,0).
-- moved_at: when it last moved (the engine's clock), so that StreamPositionPruner drops the streams that
-- went quiet. Not indexed: an index on it would make every move a non-HOT update; the pruner's chunks scan.
CREATE TABLE IF NOT EXISTS ${prefix}stream_position (
    consumer varchar(255)  NOT NULL,
    stream   varchar(255)  NOT NULL,
    position decimal(39,0) NOT NULL,
    moved_at datetime(6)   NOT NULL,
    PRIMARY KEY (consumer, stream)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
