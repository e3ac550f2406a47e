-- The application's own first migration: once's migration must not collide with its version 1.
CREATE TABLE ledger (account varchar(100) PRIMARY KEY, balance bigint NOT NULL);
