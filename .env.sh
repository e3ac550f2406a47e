export ONCE_TEST_POSTGRES_URL="jdbc:postgresql://127.0.0.1:5432/test?user=postgres" ONCE_TEST_MARIADB_URL="jdbc:mariadb://127.0.0.1:3306/test?user=root"
