package dev.once.internal;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;

/**
 * A handler's {@link Statement}: SQL that would end or reshape the claim transaction is refused
 * ({@link TransactionSql}), results and {@link #getConnection()} lead back to the guard, and
 * {@code unwrap} never hands out the driver's object. Plain delegation otherwise (no reflection: it
 * is on every statement a handler runs). Not API.
 */
@SuppressWarnings("deprecation")
class GuardedStatement<S extends Statement> implements Statement {

    final GuardedConnection connection;
    final S delegate;

    GuardedStatement(GuardedConnection connection, S delegate) {
        this.connection = connection;
        this.delegate = delegate;
    }

    @Override
    public void addBatch(String sql) throws SQLException {
        connection.check(sql);
        delegate.addBatch(sql);
    }

    @Override
    public void cancel() throws SQLException {
        delegate.cancel();
    }

    @Override
    public void clearBatch() throws SQLException {
        delegate.clearBatch();
    }

    @Override
    public void clearWarnings() throws SQLException {
        delegate.clearWarnings();
    }

    @Override
    public void close() throws SQLException {
        delegate.close();
    }

    @Override
    public void closeOnCompletion() throws SQLException {
        delegate.closeOnCompletion();
    }

    @Override
    public String enquoteIdentifier(String p1, boolean p2) throws SQLException {
        return delegate.enquoteIdentifier(p1, p2);
    }

    @Override
    public String enquoteLiteral(String p1) throws SQLException {
        return delegate.enquoteLiteral(p1);
    }

    @Override
    public String enquoteNCharLiteral(String p1) throws SQLException {
        return delegate.enquoteNCharLiteral(p1);
    }

    @Override
    public boolean execute(String sql, int[] p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.execute(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public boolean execute(String sql, String[] p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.execute(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public boolean execute(String sql, int p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.execute(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public boolean execute(String sql) throws SQLException {
        connection.check(sql);
        try {
            return delegate.execute(sql);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int[] executeBatch() throws SQLException {
        try {
            return delegate.executeBatch();
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public long[] executeLargeBatch() throws SQLException {
        try {
            return delegate.executeLargeBatch();
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public long executeLargeUpdate(String sql, int[] p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeLargeUpdate(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public long executeLargeUpdate(String sql, String[] p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeLargeUpdate(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public long executeLargeUpdate(String sql, int p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeLargeUpdate(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public long executeLargeUpdate(String sql) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeLargeUpdate(sql);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public ResultSet executeQuery(String sql) throws SQLException {
        connection.check(sql);
        try {
            return Forwarders.resultSet(connection, this, delegate.executeQuery(sql));
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int executeUpdate(String sql, int[] p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeUpdate(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int executeUpdate(String sql, String[] p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeUpdate(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int executeUpdate(String sql, int p2) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeUpdate(sql, p2);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int executeUpdate(String sql) throws SQLException {
        connection.check(sql);
        try {
            return delegate.executeUpdate(sql);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public Connection getConnection() throws SQLException {
        return connection;
    }

    @Override
    public int getFetchDirection() throws SQLException {
        return delegate.getFetchDirection();
    }

    @Override
    public int getFetchSize() throws SQLException {
        return delegate.getFetchSize();
    }

    @Override
    public ResultSet getGeneratedKeys() throws SQLException {
        return Forwarders.resultSet(connection, this, delegate.getGeneratedKeys());
    }

    @Override
    public long getLargeMaxRows() throws SQLException {
        return delegate.getLargeMaxRows();
    }

    @Override
    public long getLargeUpdateCount() throws SQLException {
        return delegate.getLargeUpdateCount();
    }

    @Override
    public int getMaxFieldSize() throws SQLException {
        return delegate.getMaxFieldSize();
    }

    @Override
    public int getMaxRows() throws SQLException {
        return delegate.getMaxRows();
    }

    @Override
    public boolean getMoreResults() throws SQLException {
        try {
            return delegate.getMoreResults();
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public boolean getMoreResults(int p1) throws SQLException {
        try {
            return delegate.getMoreResults(p1);
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int getQueryTimeout() throws SQLException {
        return delegate.getQueryTimeout();
    }

    @Override
    public ResultSet getResultSet() throws SQLException {
        return Forwarders.resultSet(connection, this, delegate.getResultSet());
    }

    @Override
    public int getResultSetConcurrency() throws SQLException {
        return delegate.getResultSetConcurrency();
    }

    @Override
    public int getResultSetHoldability() throws SQLException {
        return delegate.getResultSetHoldability();
    }

    @Override
    public int getResultSetType() throws SQLException {
        return delegate.getResultSetType();
    }

    @Override
    public int getUpdateCount() throws SQLException {
        return delegate.getUpdateCount();
    }

    @Override
    public SQLWarning getWarnings() throws SQLException {
        return delegate.getWarnings();
    }

    @Override
    public boolean isCloseOnCompletion() throws SQLException {
        return delegate.isCloseOnCompletion();
    }

    @Override
    public boolean isClosed() throws SQLException {
        return delegate.isClosed();
    }

    @Override
    public boolean isPoolable() throws SQLException {
        return delegate.isPoolable();
    }

    @Override
    public boolean isSimpleIdentifier(String p1) throws SQLException {
        return delegate.isSimpleIdentifier(p1);
    }

    @Override
    public boolean isWrapperFor(Class<?> iface) throws SQLException {
        return delegate.isWrapperFor(iface);
    }

    @Override
    public void setCursorName(String p1) throws SQLException {
        delegate.setCursorName(p1);
    }

    @Override
    public void setEscapeProcessing(boolean p1) throws SQLException {
        delegate.setEscapeProcessing(p1);
    }

    @Override
    public void setFetchDirection(int p1) throws SQLException {
        delegate.setFetchDirection(p1);
    }

    @Override
    public void setFetchSize(int p1) throws SQLException {
        delegate.setFetchSize(p1);
    }

    @Override
    public void setLargeMaxRows(long p1) throws SQLException {
        delegate.setLargeMaxRows(p1);
    }

    @Override
    public void setMaxFieldSize(int p1) throws SQLException {
        delegate.setMaxFieldSize(p1);
    }

    @Override
    public void setMaxRows(int p1) throws SQLException {
        delegate.setMaxRows(p1);
    }

    @Override
    public void setPoolable(boolean p1) throws SQLException {
        delegate.setPoolable(p1);
    }

    @Override
    public void setQueryTimeout(int p1) throws SQLException {
        delegate.setQueryTimeout(p1);
    }

    @Override
    public <T> T unwrap(Class<T> iface) throws SQLException {
        return Guards.unwrap(connection, this, delegate, iface);
    }
}
