package dev.once.spring.boot;

/**
 * Marks that the once tables were migrated at startup ({@code once.schema.migrate=true}); beans that
 * touch the tables are created after it.
 *
 * @param applied migrations applied by this start (0 when the schema was current)
 */
public record OnceSchema(int applied) {}
