-- once schema, version 1, MariaDB 10.6+ (InnoDB). ${prefix} is replaced by the validated table prefix.
--
-- Every statement of every MariaDB migration can run twice (IF NOT EXISTS, IF EXISTS, CONVERT TO):
-- MariaDB commits each DDL statement on its own, so a process killed inside a migration leaves part
-- of it applied and no version row, and Schema.migrate runs the whole migration again on the next
-- start (SchemaRerunMariaDbTest kills each migration after each of its statements). The price: a
-- table of the same name that someone else created under this prefix is not refused here.

CREATE TABLE IF NOT EXISTS ${prefix}inbox (
    consumer     varchar(100) NOT NULL,
    message_id   varchar(255) NOT NULL,
    processed_at datetime(6)  NOT NULL,
    PRIMARY KEY (consumer, message_id),
    KEY ${prefix}inbox_processed_at (processed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS ${prefix}outbox (
    id              bigint        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    event_id        varchar(255)  NOT NULL,
    destination     varchar(1000) NOT NULL,
    msg_key         varchar(255),
    payload         longblob      NOT NULL,
    headers         text          NOT NULL,
    idempotency_key varchar(255)  NOT NULL,
    status          varchar(16)   NOT NULL DEFAULT 'pending',
    attempts        integer       NOT NULL DEFAULT 0,
    available_at    datetime(6)   NOT NULL,
    created_at      datetime(6)   NOT NULL,
    sent_at         datetime(6),
    last_error      text,
    KEY ${prefix}outbox_pending (status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS ${prefix}idempotency_key (
    scope          varchar(100) NOT NULL,
    idem_key       varchar(255) NOT NULL,
    fingerprint    varchar(128) NOT NULL,
    state          varchar(16)  NOT NULL,
    result_status  integer,
    result         longblob,
    fencing_token  bigint       NOT NULL,
    locked_until   datetime(6),
    created_at     datetime(6)  NOT NULL,
    updated_at     datetime(6)  NOT NULL,
    PRIMARY KEY (scope, idem_key),
    KEY ${prefix}idempotency_key_created_at (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS ${prefix}lease (
    name       varchar(255) NOT NULL PRIMARY KEY,
    owner      varchar(255),
    token      bigint       NOT NULL,
    expires_at datetime(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS ${prefix}fence (
    resource   varchar(255) NOT NULL PRIMARY KEY,
    token      bigint       NOT NULL,
    updated_at datetime(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
