package dev.once.spring.jpa;

import org.springframework.data.jpa.repository.JpaRepository;

/** A Spring Data JPA repository. */
public interface PaymentRepository extends JpaRepository<Payment, String> {}
