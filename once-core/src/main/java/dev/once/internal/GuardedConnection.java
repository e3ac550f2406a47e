package dev.once.internal;

import dev.once.HandlerMisuseException;
import dev.once.internal.fence.TakenFence;
import dev.once.jdbc.Dialect;
import java.sql.Array;
import java.sql.Blob;
import java.sql.CallableStatement;
import java.sql.Clob;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.NClob;
import java.sql.PreparedStatement;
import java.sql.SQLClientInfoException;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.SQLXML;
import java.sql.Savepoint;
import java.sql.ShardingKey;
import java.sql.Statement;
import java.sql.Struct;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Executor;

/**
 * The connection a handler gets ({@link dev.once.Tx#connection()}): everything passes through
 * except what would end or reshape the claim transaction, which is refused with
 * {@link HandlerMisuseException} and remembered, so a handler that catches the refusal and carries on
 * is still rolled back. Refused: {@code commit}, {@code rollback()} (a savepoint's rollback passes),
 * {@code close}, {@code abort}, {@code setAutoCommit}, {@code setTransactionIsolation},
 * {@code setReadOnly}; SQL that controls the transaction ({@link TransactionSql}); {@code unwrap} to
 * anything that would hand out the driver's connection or statement. Statements, results and
 * metadata are wrapped so that none leads back to the raw connection. Plain delegation, no
 * reflection: it is on every statement a handler runs. Measured (once-bench {@code guard}, JMH,
 * prepare + two binds + close on pgjdbc, load ~30): raw 392 B and 16-19 µs, guarded 528 B and
 * 20-31 µs, a {@code java.lang.reflect.Proxy} running the same check 640 B and 42-46 µs, beside a
 * 490-765 µs round trip; the hand-written form stays because it is the cheaper one. Since the check
 * stopped allocating per statement (issue 21), guarded is 416 B: the wrapper object. Not
 * thread-safe. Not API.
 */
@SuppressWarnings("deprecation")
public final class GuardedConnection implements Connection {

    private final Connection delegate;
    private final boolean mysqlLexing;
    private static final String CLAIM_TRANSACTION = "the claim transaction; the engine commits or rolls back the"
            + " claim and the effect together, so this delivery is rolled back and reported as a permanent failure:"
            + " remove the call";

    private final ClaimWatch watch;
    private final String refusal;
    private String misuse;
    // The first leading word of check()'s SQL that the watch acts on; one receiver per connection, not a
    // capturing lambda and an array per statement (issue 21: the check runs on every handler statement),
    // made by the first statement the watch does not know harmless (most handlers run only known ones).
    private String firstWord;
    private TransactionSql.Leading leading;

    /**
     * @param watch the claim transaction's watch: told of savepoints, of the SQL exceptions the handler
     *     gets, and of SQL that may cost the claim; its dialect says how the database reads string
     *     literals and comments ({@link Dialect#mysqlLexing()})
     */
    public GuardedConnection(Connection delegate, ClaimWatch watch) {
        this(delegate, watch, CLAIM_TRANSACTION);
    }

    /**
     * @param refusal what a refused call was made on and what follows, completing "handler tried
     *     {@code <call>} on ..." in the refusal's message
     */
    public GuardedConnection(Connection delegate, ClaimWatch watch, String refusal) {
        this.delegate = delegate;
        this.mysqlLexing = watch.dialect().mysqlLexing();
        this.watch = watch;
        this.refusal = refusal;
    }

    /** Notes {@code e} on its way to the handler (which may swallow it) and returns it to be thrown. */
    SQLException failed(SQLException e) {
        return watch.failed(e);
    }

    /**
     * The guard {@code connection} is, or wraps (a pool's or a framework's proxy around a handler's connection);
     * null when it is none. For {@link dev.once.lease.Fence#check}: a fence taken on a guard is checked again
     * before once commits the transaction ({@link ClaimWatch#fenceAgain}).
     */
    public static GuardedConnection of(Connection connection) throws SQLException {
        if (connection instanceof GuardedConnection g) {
            return g;
        }
        return connection.isWrapperFor(GuardedConnection.class) ? connection.unwrap(GuardedConnection.class) : null;
    }

    /** A fence checked on this connection ({@link dev.once.lease.Fence#check}): see {@link ClaimWatch#fenced}. */
    public void fenced(TakenFence fence) {
        watch.fenced(fence);
    }

    /** Whether this connection reports to {@code w}: it is the guard of that claim transaction's handler. */
    boolean watches(ClaimWatch w) {
        return watch == w;
    }

    /**
     * Whether {@code unwrap} may hand out the driver's connection or statement: only while the integration
     * has confined the handler to this guard, which then no longer sees everything (the watch is told, so
     * the claim is checked before the commit).
     */
    boolean unwrapsUnguarded() {
        if (!watch.confines(this)) {
            return false;
        }
        watch.suspect("the driver's connection or statement unwrapped (statements through it pass no guard)");
        return true;
    }

    /** The refused call or SQL, or null if the handler kept to its part. */
    public String misuse() {
        return misuse;
    }

    /** Refuses SQL that would end or reshape the claim transaction. */
    void check(String sql) throws SQLException {
        if (watch.knownHarmless(sql)) {
            return;
        }
        firstWord = null;
        if (leading == null) {
            leading = w -> {
                if (firstWord == null
                        && (w.equals("SAVEPOINT") || w.equals("ROLLBACK") || w.equals("CALL") || w.equals("EXECUTE"))) {
                    firstWord = w;
                }
            };
        }
        String refused = TransactionSql.refusal(sql, mysqlLexing, leading);
        if (refused != null) {
            throw refuse(refused + " issued as SQL", refused);
        }
        watch.sql(sql, firstWord);
    }

    private HandlerMisuseException refuse(String what, String name) {
        misuse = what;
        return new HandlerMisuseException("handler tried " + what + " on " + refusal);
    }

    @Override
    public void abort(Executor p1) throws SQLException {
        throw refuse("Connection.abort()", "abort");
    }

    @Override
    public void beginRequest() throws SQLException {
        delegate.beginRequest();
    }

    @Override
    public void clearWarnings() throws SQLException {
        delegate.clearWarnings();
    }

    @Override
    public void close() throws SQLException {
        throw refuse("Connection.close()", "close");
    }

    @Override
    public void commit() throws SQLException {
        throw refuse("Connection.commit()", "commit");
    }

    @Override
    public Array createArrayOf(String p1, Object[] p2) throws SQLException {
        return delegate.createArrayOf(p1, p2);
    }

    @Override
    public Blob createBlob() throws SQLException {
        return delegate.createBlob();
    }

    @Override
    public Clob createClob() throws SQLException {
        return delegate.createClob();
    }

    @Override
    public NClob createNClob() throws SQLException {
        return delegate.createNClob();
    }

    @Override
    public SQLXML createSQLXML() throws SQLException {
        return delegate.createSQLXML();
    }

    @Override
    public Statement createStatement() throws SQLException {
        return new GuardedStatement<>(this, delegate.createStatement());
    }

    @Override
    public Statement createStatement(int p1, int p2, int p3) throws SQLException {
        return new GuardedStatement<>(this, delegate.createStatement(p1, p2, p3));
    }

    @Override
    public Statement createStatement(int p1, int p2) throws SQLException {
        return new GuardedStatement<>(this, delegate.createStatement(p1, p2));
    }

    @Override
    public Struct createStruct(String p1, Object[] p2) throws SQLException {
        return delegate.createStruct(p1, p2);
    }

    @Override
    public void endRequest() throws SQLException {
        delegate.endRequest();
    }

    @Override
    public boolean getAutoCommit() throws SQLException {
        return delegate.getAutoCommit();
    }

    @Override
    public String getCatalog() throws SQLException {
        return delegate.getCatalog();
    }

    @Override
    public Properties getClientInfo() throws SQLException {
        return delegate.getClientInfo();
    }

    @Override
    public String getClientInfo(String p1) throws SQLException {
        return delegate.getClientInfo(p1);
    }

    @Override
    public int getHoldability() throws SQLException {
        return delegate.getHoldability();
    }

    @Override
    public DatabaseMetaData getMetaData() throws SQLException {
        return Forwarders.metaData(this, delegate.getMetaData());
    }

    @Override
    public int getNetworkTimeout() throws SQLException {
        return delegate.getNetworkTimeout();
    }

    @Override
    public String getSchema() throws SQLException {
        return delegate.getSchema();
    }

    @Override
    public int getTransactionIsolation() throws SQLException {
        return delegate.getTransactionIsolation();
    }

    @Override
    public Map<String, Class<?>> getTypeMap() throws SQLException {
        return delegate.getTypeMap();
    }

    @Override
    public SQLWarning getWarnings() throws SQLException {
        return delegate.getWarnings();
    }

    @Override
    public boolean isClosed() throws SQLException {
        return delegate.isClosed();
    }

    @Override
    public boolean isReadOnly() throws SQLException {
        return delegate.isReadOnly();
    }

    @Override
    public boolean isValid(int p1) throws SQLException {
        return delegate.isValid(p1);
    }

    @Override
    public boolean isWrapperFor(Class<?> iface) throws SQLException {
        return iface.isInstance(this) || delegate.isWrapperFor(iface);
    }

    @Override
    public String nativeSQL(String p1) throws SQLException {
        return delegate.nativeSQL(p1);
    }

    @Override
    public CallableStatement prepareCall(String sql, int p2, int p3, int p4) throws SQLException {
        check(sql);
        watch.suspect("a procedure call (it may end the transaction)");
        return Forwarders.callable(this, delegate.prepareCall(sql, p2, p3, p4));
    }

    @Override
    public CallableStatement prepareCall(String sql, int p2, int p3) throws SQLException {
        check(sql);
        watch.suspect("a procedure call (it may end the transaction)");
        return Forwarders.callable(this, delegate.prepareCall(sql, p2, p3));
    }

    @Override
    public CallableStatement prepareCall(String sql) throws SQLException {
        check(sql);
        watch.suspect("a procedure call (it may end the transaction)");
        return Forwarders.callable(this, delegate.prepareCall(sql));
    }

    @Override
    public PreparedStatement prepareStatement(String sql, int[] p2) throws SQLException {
        check(sql);
        return new GuardedPreparedStatement<>(this, delegate.prepareStatement(sql, p2));
    }

    @Override
    public PreparedStatement prepareStatement(String sql, String[] p2) throws SQLException {
        check(sql);
        return new GuardedPreparedStatement<>(this, delegate.prepareStatement(sql, p2));
    }

    @Override
    public PreparedStatement prepareStatement(String sql, int p2, int p3, int p4) throws SQLException {
        check(sql);
        return new GuardedPreparedStatement<>(this, delegate.prepareStatement(sql, p2, p3, p4));
    }

    @Override
    public PreparedStatement prepareStatement(String sql, int p2, int p3) throws SQLException {
        check(sql);
        return new GuardedPreparedStatement<>(this, delegate.prepareStatement(sql, p2, p3));
    }

    @Override
    public PreparedStatement prepareStatement(String sql, int p2) throws SQLException {
        check(sql);
        return new GuardedPreparedStatement<>(this, delegate.prepareStatement(sql, p2));
    }

    @Override
    public PreparedStatement prepareStatement(String sql) throws SQLException {
        check(sql);
        return new GuardedPreparedStatement<>(this, delegate.prepareStatement(sql));
    }

    @Override
    public void releaseSavepoint(Savepoint p1) throws SQLException {
        try {
            delegate.releaseSavepoint(p1);
        } catch (SQLException e) {
            throw failed(e);
        }
        watch.releaseSavepoint(p1);
    }

    @Override
    public void rollback() throws SQLException {
        throw refuse("Connection.rollback()", "rollback");
    }

    @Override
    public void rollback(Savepoint p1) throws SQLException {
        try {
            delegate.rollback(p1);
        } catch (SQLException e) {
            throw failed(e);
        }
        watch.rollbackToSavepoint(p1);
    }

    @Override
    public void setAutoCommit(boolean p1) throws SQLException {
        throw refuse("Connection.setAutoCommit()", "setAutoCommit");
    }

    @Override
    public void setCatalog(String p1) throws SQLException {
        delegate.setCatalog(p1);
    }

    @Override
    public void setClientInfo(String p1, String p2) throws SQLClientInfoException {
        delegate.setClientInfo(p1, p2);
    }

    @Override
    public void setClientInfo(Properties p1) throws SQLClientInfoException {
        delegate.setClientInfo(p1);
    }

    @Override
    public void setHoldability(int p1) throws SQLException {
        delegate.setHoldability(p1);
    }

    @Override
    public void setNetworkTimeout(Executor p1, int p2) throws SQLException {
        delegate.setNetworkTimeout(p1, p2);
    }

    @Override
    public void setReadOnly(boolean p1) throws SQLException {
        throw refuse("Connection.setReadOnly()", "setReadOnly");
    }

    @Override
    public Savepoint setSavepoint() throws SQLException {
        return marked(delegate::setSavepoint);
    }

    @Override
    public Savepoint setSavepoint(String p1) throws SQLException {
        return marked(() -> delegate.setSavepoint(p1));
    }

    private interface SavepointCall {
        Savepoint set() throws SQLException;
    }

    // The outbox buffer's position is kept with the savepoint, so that rolling back to it drops the
    // rows added since (OutboxBuffer.rollbackToSavepoint).
    private Savepoint marked(SavepointCall call) throws SQLException {
        Savepoint savepoint;
        try {
            savepoint = call.set();
        } catch (SQLException e) {
            throw failed(e);
        }
        watch.savepoint(savepoint);
        return savepoint;
    }

    @Override
    public void setSchema(String p1) throws SQLException {
        delegate.setSchema(p1);
    }

    @Override
    public void setShardingKey(ShardingKey p1, ShardingKey p2) throws SQLException {
        delegate.setShardingKey(p1, p2);
    }

    @Override
    public void setShardingKey(ShardingKey p1) throws SQLException {
        delegate.setShardingKey(p1);
    }

    @Override
    public boolean setShardingKeyIfValid(ShardingKey p1, int p2) throws SQLException {
        return delegate.setShardingKeyIfValid(p1, p2);
    }

    @Override
    public boolean setShardingKeyIfValid(ShardingKey p1, ShardingKey p2, int p3) throws SQLException {
        return delegate.setShardingKeyIfValid(p1, p2, p3);
    }

    @Override
    public void setTransactionIsolation(int p1) throws SQLException {
        throw refuse("Connection.setTransactionIsolation()", "setTransactionIsolation");
    }

    @Override
    public void setTypeMap(Map<String, Class<?>> p1) throws SQLException {
        delegate.setTypeMap(p1);
    }

    @Override
    public <T> T unwrap(Class<T> iface) throws SQLException {
        return Guards.unwrap(this, this, delegate, iface);
    }
}
