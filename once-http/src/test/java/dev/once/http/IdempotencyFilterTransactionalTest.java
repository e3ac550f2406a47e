package dev.once.http;

/** The contract through {@link IdempotencyFilterTest}'s integration with {@code transactional(true)}: effect and result commit together. */
class IdempotencyFilterTransactionalTest extends IdempotencyFilterTest {

    @Override
    protected boolean transactional() {
        return true;
    }
}
