package dev.once.http;

/** The contract through {@link IdempotentHandlerTest}'s integration with {@code transactional(true)}: effect and result commit together. */
class IdempotentHandlerTransactionalTest extends IdempotentHandlerTest {

    @Override
    protected boolean transactional() {
        return true;
    }
}
