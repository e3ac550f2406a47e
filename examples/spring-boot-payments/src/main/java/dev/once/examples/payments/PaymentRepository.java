package dev.once.examples.payments;

import org.springframework.data.jpa.repository.JpaRepository;

/** Spring Data JPA repository of payments. */
public interface PaymentRepository extends JpaRepository<Payment, String> {}
