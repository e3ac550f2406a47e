package dev.once.internal;

import java.io.InputStream;
import java.io.Reader;
import java.math.BigDecimal;
import java.net.URL;
import java.sql.Array;
import java.sql.Blob;
import java.sql.Clob;
import java.sql.Date;
import java.sql.NClob;
import java.sql.ParameterMetaData;
import java.sql.PreparedStatement;
import java.sql.Ref;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.RowId;
import java.sql.SQLException;
import java.sql.SQLType;
import java.sql.SQLXML;
import java.sql.Time;
import java.sql.Timestamp;
import java.util.Calendar;

/** A handler's {@link PreparedStatement}; its SQL was checked when it was prepared. Not API. */
@SuppressWarnings("deprecation")
class GuardedPreparedStatement<S extends PreparedStatement> extends GuardedStatement<S> implements PreparedStatement {

    GuardedPreparedStatement(GuardedConnection connection, S delegate) {
        super(connection, delegate);
    }

    @Override
    public void addBatch() throws SQLException {
        delegate.addBatch();
    }

    @Override
    public void clearParameters() throws SQLException {
        delegate.clearParameters();
    }

    @Override
    public boolean execute() throws SQLException {
        try {
            return delegate.execute();
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public long executeLargeUpdate() throws SQLException {
        try {
            return delegate.executeLargeUpdate();
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public ResultSet executeQuery() throws SQLException {
        try {
            return Forwarders.resultSet(connection, this, delegate.executeQuery());
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public int executeUpdate() throws SQLException {
        try {
            return delegate.executeUpdate();
        } catch (SQLException e) {
            throw connection.failed(e);
        }
    }

    @Override
    public ResultSetMetaData getMetaData() throws SQLException {
        return delegate.getMetaData();
    }

    @Override
    public ParameterMetaData getParameterMetaData() throws SQLException {
        return delegate.getParameterMetaData();
    }

    @Override
    public void setArray(int p1, Array p2) throws SQLException {
        delegate.setArray(p1, p2);
    }

    @Override
    public void setAsciiStream(int p1, InputStream p2, int p3) throws SQLException {
        delegate.setAsciiStream(p1, p2, p3);
    }

    @Override
    public void setAsciiStream(int p1, InputStream p2, long p3) throws SQLException {
        delegate.setAsciiStream(p1, p2, p3);
    }

    @Override
    public void setAsciiStream(int p1, InputStream p2) throws SQLException {
        delegate.setAsciiStream(p1, p2);
    }

    @Override
    public void setBigDecimal(int p1, BigDecimal p2) throws SQLException {
        delegate.setBigDecimal(p1, p2);
    }

    @Override
    public void setBinaryStream(int p1, InputStream p2, int p3) throws SQLException {
        delegate.setBinaryStream(p1, p2, p3);
    }

    @Override
    public void setBinaryStream(int p1, InputStream p2, long p3) throws SQLException {
        delegate.setBinaryStream(p1, p2, p3);
    }

    @Override
    public void setBinaryStream(int p1, InputStream p2) throws SQLException {
        delegate.setBinaryStream(p1, p2);
    }

    @Override
    public void setBlob(int p1, InputStream p2, long p3) throws SQLException {
        delegate.setBlob(p1, p2, p3);
    }

    @Override
    public void setBlob(int p1, InputStream p2) throws SQLException {
        delegate.setBlob(p1, p2);
    }

    @Override
    public void setBlob(int p1, Blob p2) throws SQLException {
        delegate.setBlob(p1, p2);
    }

    @Override
    public void setBoolean(int p1, boolean p2) throws SQLException {
        delegate.setBoolean(p1, p2);
    }

    @Override
    public void setByte(int p1, byte p2) throws SQLException {
        delegate.setByte(p1, p2);
    }

    @Override
    public void setBytes(int p1, byte[] p2) throws SQLException {
        delegate.setBytes(p1, p2);
    }

    @Override
    public void setCharacterStream(int p1, Reader p2, int p3) throws SQLException {
        delegate.setCharacterStream(p1, p2, p3);
    }

    @Override
    public void setCharacterStream(int p1, Reader p2, long p3) throws SQLException {
        delegate.setCharacterStream(p1, p2, p3);
    }

    @Override
    public void setCharacterStream(int p1, Reader p2) throws SQLException {
        delegate.setCharacterStream(p1, p2);
    }

    @Override
    public void setClob(int p1, Reader p2, long p3) throws SQLException {
        delegate.setClob(p1, p2, p3);
    }

    @Override
    public void setClob(int p1, Reader p2) throws SQLException {
        delegate.setClob(p1, p2);
    }

    @Override
    public void setClob(int p1, Clob p2) throws SQLException {
        delegate.setClob(p1, p2);
    }

    @Override
    public void setDate(int p1, Date p2, Calendar p3) throws SQLException {
        delegate.setDate(p1, p2, p3);
    }

    @Override
    public void setDate(int p1, Date p2) throws SQLException {
        delegate.setDate(p1, p2);
    }

    @Override
    public void setDouble(int p1, double p2) throws SQLException {
        delegate.setDouble(p1, p2);
    }

    @Override
    public void setFloat(int p1, float p2) throws SQLException {
        delegate.setFloat(p1, p2);
    }

    @Override
    public void setInt(int p1, int p2) throws SQLException {
        delegate.setInt(p1, p2);
    }

    @Override
    public void setLong(int p1, long p2) throws SQLException {
        delegate.setLong(p1, p2);
    }

    @Override
    public void setNCharacterStream(int p1, Reader p2, long p3) throws SQLException {
        delegate.setNCharacterStream(p1, p2, p3);
    }

    @Override
    public void setNCharacterStream(int p1, Reader p2) throws SQLException {
        delegate.setNCharacterStream(p1, p2);
    }

    @Override
    public void setNClob(int p1, Reader p2, long p3) throws SQLException {
        delegate.setNClob(p1, p2, p3);
    }

    @Override
    public void setNClob(int p1, Reader p2) throws SQLException {
        delegate.setNClob(p1, p2);
    }

    @Override
    public void setNClob(int p1, NClob p2) throws SQLException {
        delegate.setNClob(p1, p2);
    }

    @Override
    public void setNString(int p1, String p2) throws SQLException {
        delegate.setNString(p1, p2);
    }

    @Override
    public void setNull(int p1, int p2, String p3) throws SQLException {
        delegate.setNull(p1, p2, p3);
    }

    @Override
    public void setNull(int p1, int p2) throws SQLException {
        delegate.setNull(p1, p2);
    }

    @Override
    public void setObject(int p1, Object p2, int p3, int p4) throws SQLException {
        delegate.setObject(p1, p2, p3, p4);
    }

    @Override
    public void setObject(int p1, Object p2, int p3) throws SQLException {
        delegate.setObject(p1, p2, p3);
    }

    @Override
    public void setObject(int p1, Object p2, SQLType p3, int p4) throws SQLException {
        delegate.setObject(p1, p2, p3, p4);
    }

    @Override
    public void setObject(int p1, Object p2, SQLType p3) throws SQLException {
        delegate.setObject(p1, p2, p3);
    }

    @Override
    public void setObject(int p1, Object p2) throws SQLException {
        delegate.setObject(p1, p2);
    }

    @Override
    public void setRef(int p1, Ref p2) throws SQLException {
        delegate.setRef(p1, p2);
    }

    @Override
    public void setRowId(int p1, RowId p2) throws SQLException {
        delegate.setRowId(p1, p2);
    }

    @Override
    public void setSQLXML(int p1, SQLXML p2) throws SQLException {
        delegate.setSQLXML(p1, p2);
    }

    @Override
    public void setShort(int p1, short p2) throws SQLException {
        delegate.setShort(p1, p2);
    }

    @Override
    public void setString(int p1, String p2) throws SQLException {
        delegate.setString(p1, p2);
    }

    @Override
    public void setTime(int p1, Time p2, Calendar p3) throws SQLException {
        delegate.setTime(p1, p2, p3);
    }

    @Override
    public void setTime(int p1, Time p2) throws SQLException {
        delegate.setTime(p1, p2);
    }

    @Override
    public void setTimestamp(int p1, Timestamp p2, Calendar p3) throws SQLException {
        delegate.setTimestamp(p1, p2, p3);
    }

    @Override
    public void setTimestamp(int p1, Timestamp p2) throws SQLException {
        delegate.setTimestamp(p1, p2);
    }

    @Override
    public void setURL(int p1, URL p2) throws SQLException {
        delegate.setURL(p1, p2);
    }

    @Override
    public void setUnicodeStream(int p1, InputStream p2, int p3) throws SQLException {
        delegate.setUnicodeStream(p1, p2, p3);
    }
}
