/**
 * {@code once} inside Spring-managed transactions: the claim and the outbox join the current
 * transaction of a {@code DataSourceTransactionManager}, {@code JdbcTransactionManager} or
 * {@code JpaTransactionManager}, so {@code JdbcTemplate}, {@code JdbcClient} and JPA repository writes
 * commit atomically with the claim; outcomes and acknowledgements happen after commit.
 */
package dev.once.spring;
