CREATE TABLE IF NOT EXISTS payment (event_id varchar(255) PRIMARY KEY, account varchar(100) NOT NULL, amount bigint NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (account varchar(100) PRIMARY KEY, balance bigint NOT NULL);
