-- once schema, version 1, PostgreSQL. ${prefix} is replaced by the validated table prefix.

-- Processed events: the claim. The primary key is what makes the claim atomic under concurrency.
CREATE TABLE ${prefix}inbox (
    consumer     varchar(100) NOT NULL,
    message_id   varchar(255) NOT NULL,
    processed_at timestamptz  NOT NULL,
    PRIMARY KEY (consumer, message_id)
);
-- BRIN, not B-tree: processed_at grows with insertion order, so a BRIN index finds old rows for
-- retention at almost no cost per claim (a B-tree would add a second index write to every claim).
CREATE INDEX ${prefix}inbox_processed_at ON ${prefix}inbox USING brin (processed_at);

-- Pending external effects and publishes, written in the claim transaction.
CREATE TABLE ${prefix}outbox (
    id              bigserial    PRIMARY KEY,
    event_id        varchar(255) NOT NULL,
    destination     varchar(1000) NOT NULL,
    msg_key         varchar(255),
    payload         bytea        NOT NULL,
    headers         text         NOT NULL,
    idempotency_key varchar(255) NOT NULL,
    status          varchar(16)  NOT NULL DEFAULT 'pending',
    attempts        integer      NOT NULL DEFAULT 0,
    available_at    timestamptz  NOT NULL,
    created_at      timestamptz  NOT NULL,
    sent_at         timestamptz,
    last_error      text
);
CREATE INDEX ${prefix}outbox_pending ON ${prefix}outbox (id) WHERE status = 'pending';

-- Stripe-style idempotency records.
CREATE TABLE ${prefix}idempotency_key (
    scope          varchar(100) NOT NULL,
    idem_key       varchar(255) NOT NULL,
    fingerprint    varchar(128) NOT NULL,
    state          varchar(16)  NOT NULL,
    result_status  integer,
    result         bytea,
    fencing_token  bigint       NOT NULL,
    locked_until   timestamptz,
    created_at     timestamptz  NOT NULL,
    updated_at     timestamptz  NOT NULL,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX ${prefix}idempotency_key_created_at ON ${prefix}idempotency_key USING brin (created_at);

-- Leases: the token grows by one with every acquisition.
CREATE TABLE ${prefix}lease (
    name       varchar(255) PRIMARY KEY,
    owner      varchar(255),
    token      bigint       NOT NULL,
    expires_at timestamptz
);

-- The newest fencing token each resource has accepted.
CREATE TABLE ${prefix}fence (
    resource   varchar(255) PRIMARY KEY,
    token      bigint       NOT NULL,
    updated_at timestamptz  NOT NULL
);
