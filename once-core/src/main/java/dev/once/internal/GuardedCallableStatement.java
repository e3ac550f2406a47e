package dev.once.internal;

import java.io.InputStream;
import java.io.Reader;
import java.math.BigDecimal;
import java.net.URL;
import java.sql.Array;
import java.sql.Blob;
import java.sql.CallableStatement;
import java.sql.Clob;
import java.sql.Date;
import java.sql.NClob;
import java.sql.Ref;
import java.sql.RowId;
import java.sql.SQLException;
import java.sql.SQLType;
import java.sql.SQLXML;
import java.sql.Time;
import java.sql.Timestamp;
import java.util.Calendar;
import java.util.Map;

/** A handler's {@link CallableStatement}; its SQL was checked when it was prepared. Not API. */
@SuppressWarnings("deprecation")
final class GuardedCallableStatement extends GuardedPreparedStatement<CallableStatement> implements CallableStatement {

    GuardedCallableStatement(GuardedConnection connection, CallableStatement delegate) {
        super(connection, delegate);
    }

    @Override
    public Array getArray(String p1) throws SQLException {
        return delegate.getArray(p1);
    }

    @Override
    public Array getArray(int p1) throws SQLException {
        return delegate.getArray(p1);
    }

    @Override
    public BigDecimal getBigDecimal(String p1) throws SQLException {
        return delegate.getBigDecimal(p1);
    }

    @Override
    public BigDecimal getBigDecimal(int p1, int p2) throws SQLException {
        return delegate.getBigDecimal(p1, p2);
    }

    @Override
    public BigDecimal getBigDecimal(int p1) throws SQLException {
        return delegate.getBigDecimal(p1);
    }

    @Override
    public Blob getBlob(String p1) throws SQLException {
        return delegate.getBlob(p1);
    }

    @Override
    public Blob getBlob(int p1) throws SQLException {
        return delegate.getBlob(p1);
    }

    @Override
    public boolean getBoolean(String p1) throws SQLException {
        return delegate.getBoolean(p1);
    }

    @Override
    public boolean getBoolean(int p1) throws SQLException {
        return delegate.getBoolean(p1);
    }

    @Override
    public byte getByte(String p1) throws SQLException {
        return delegate.getByte(p1);
    }

    @Override
    public byte getByte(int p1) throws SQLException {
        return delegate.getByte(p1);
    }

    @Override
    public byte[] getBytes(String p1) throws SQLException {
        return delegate.getBytes(p1);
    }

    @Override
    public byte[] getBytes(int p1) throws SQLException {
        return delegate.getBytes(p1);
    }

    @Override
    public Reader getCharacterStream(String p1) throws SQLException {
        return delegate.getCharacterStream(p1);
    }

    @Override
    public Reader getCharacterStream(int p1) throws SQLException {
        return delegate.getCharacterStream(p1);
    }

    @Override
    public Clob getClob(String p1) throws SQLException {
        return delegate.getClob(p1);
    }

    @Override
    public Clob getClob(int p1) throws SQLException {
        return delegate.getClob(p1);
    }

    @Override
    public Date getDate(String p1, Calendar p2) throws SQLException {
        return delegate.getDate(p1, p2);
    }

    @Override
    public Date getDate(String p1) throws SQLException {
        return delegate.getDate(p1);
    }

    @Override
    public Date getDate(int p1, Calendar p2) throws SQLException {
        return delegate.getDate(p1, p2);
    }

    @Override
    public Date getDate(int p1) throws SQLException {
        return delegate.getDate(p1);
    }

    @Override
    public double getDouble(String p1) throws SQLException {
        return delegate.getDouble(p1);
    }

    @Override
    public double getDouble(int p1) throws SQLException {
        return delegate.getDouble(p1);
    }

    @Override
    public float getFloat(String p1) throws SQLException {
        return delegate.getFloat(p1);
    }

    @Override
    public float getFloat(int p1) throws SQLException {
        return delegate.getFloat(p1);
    }

    @Override
    public int getInt(String p1) throws SQLException {
        return delegate.getInt(p1);
    }

    @Override
    public int getInt(int p1) throws SQLException {
        return delegate.getInt(p1);
    }

    @Override
    public long getLong(String p1) throws SQLException {
        return delegate.getLong(p1);
    }

    @Override
    public long getLong(int p1) throws SQLException {
        return delegate.getLong(p1);
    }

    @Override
    public Reader getNCharacterStream(String p1) throws SQLException {
        return delegate.getNCharacterStream(p1);
    }

    @Override
    public Reader getNCharacterStream(int p1) throws SQLException {
        return delegate.getNCharacterStream(p1);
    }

    @Override
    public NClob getNClob(String p1) throws SQLException {
        return delegate.getNClob(p1);
    }

    @Override
    public NClob getNClob(int p1) throws SQLException {
        return delegate.getNClob(p1);
    }

    @Override
    public String getNString(String p1) throws SQLException {
        return delegate.getNString(p1);
    }

    @Override
    public String getNString(int p1) throws SQLException {
        return delegate.getNString(p1);
    }

    @Override
    public <T> T getObject(String p1, Class<T> p2) throws SQLException {
        return delegate.getObject(p1, p2);
    }

    @Override
    public Object getObject(String p1, Map<String, Class<?>> p2) throws SQLException {
        return delegate.getObject(p1, p2);
    }

    @Override
    public Object getObject(String p1) throws SQLException {
        return delegate.getObject(p1);
    }

    @Override
    public <T> T getObject(int p1, Class<T> p2) throws SQLException {
        return delegate.getObject(p1, p2);
    }

    @Override
    public Object getObject(int p1, Map<String, Class<?>> p2) throws SQLException {
        return delegate.getObject(p1, p2);
    }

    @Override
    public Object getObject(int p1) throws SQLException {
        return delegate.getObject(p1);
    }

    @Override
    public Ref getRef(String p1) throws SQLException {
        return delegate.getRef(p1);
    }

    @Override
    public Ref getRef(int p1) throws SQLException {
        return delegate.getRef(p1);
    }

    @Override
    public RowId getRowId(String p1) throws SQLException {
        return delegate.getRowId(p1);
    }

    @Override
    public RowId getRowId(int p1) throws SQLException {
        return delegate.getRowId(p1);
    }

    @Override
    public SQLXML getSQLXML(String p1) throws SQLException {
        return delegate.getSQLXML(p1);
    }

    @Override
    public SQLXML getSQLXML(int p1) throws SQLException {
        return delegate.getSQLXML(p1);
    }

    @Override
    public short getShort(String p1) throws SQLException {
        return delegate.getShort(p1);
    }

    @Override
    public short getShort(int p1) throws SQLException {
        return delegate.getShort(p1);
    }

    @Override
    public String getString(String p1) throws SQLException {
        return delegate.getString(p1);
    }

    @Override
    public String getString(int p1) throws SQLException {
        return delegate.getString(p1);
    }

    @Override
    public Time getTime(String p1, Calendar p2) throws SQLException {
        return delegate.getTime(p1, p2);
    }

    @Override
    public Time getTime(String p1) throws SQLException {
        return delegate.getTime(p1);
    }

    @Override
    public Time getTime(int p1, Calendar p2) throws SQLException {
        return delegate.getTime(p1, p2);
    }

    @Override
    public Time getTime(int p1) throws SQLException {
        return delegate.getTime(p1);
    }

    @Override
    public Timestamp getTimestamp(String p1, Calendar p2) throws SQLException {
        return delegate.getTimestamp(p1, p2);
    }

    @Override
    public Timestamp getTimestamp(String p1) throws SQLException {
        return delegate.getTimestamp(p1);
    }

    @Override
    public Timestamp getTimestamp(int p1, Calendar p2) throws SQLException {
        return delegate.getTimestamp(p1, p2);
    }

    @Override
    public Timestamp getTimestamp(int p1) throws SQLException {
        return delegate.getTimestamp(p1);
    }

    @Override
    public URL getURL(String p1) throws SQLException {
        return delegate.getURL(p1);
    }

    @Override
    public URL getURL(int p1) throws SQLException {
        return delegate.getURL(p1);
    }

    @Override
    public void registerOutParameter(String p1, int p2, String p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(String p1, int p2, int p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(String p1, int p2) throws SQLException {
        delegate.registerOutParameter(p1, p2);
    }

    @Override
    public void registerOutParameter(String p1, SQLType p2, String p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(String p1, SQLType p2, int p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(String p1, SQLType p2) throws SQLException {
        delegate.registerOutParameter(p1, p2);
    }

    @Override
    public void registerOutParameter(int p1, int p2, String p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(int p1, int p2, int p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(int p1, int p2) throws SQLException {
        delegate.registerOutParameter(p1, p2);
    }

    @Override
    public void registerOutParameter(int p1, SQLType p2, String p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(int p1, SQLType p2, int p3) throws SQLException {
        delegate.registerOutParameter(p1, p2, p3);
    }

    @Override
    public void registerOutParameter(int p1, SQLType p2) throws SQLException {
        delegate.registerOutParameter(p1, p2);
    }

    @Override
    public void setAsciiStream(String p1, InputStream p2, int p3) throws SQLException {
        delegate.setAsciiStream(p1, p2, p3);
    }

    @Override
    public void setAsciiStream(String p1, InputStream p2, long p3) throws SQLException {
        delegate.setAsciiStream(p1, p2, p3);
    }

    @Override
    public void setAsciiStream(String p1, InputStream p2) throws SQLException {
        delegate.setAsciiStream(p1, p2);
    }

    @Override
    public void setBigDecimal(String p1, BigDecimal p2) throws SQLException {
        delegate.setBigDecimal(p1, p2);
    }

    @Override
    public void setBinaryStream(String p1, InputStream p2, int p3) throws SQLException {
        delegate.setBinaryStream(p1, p2, p3);
    }

    @Override
    public void setBinaryStream(String p1, InputStream p2, long p3) throws SQLException {
        delegate.setBinaryStream(p1, p2, p3);
    }

    @Override
    public void setBinaryStream(String p1, InputStream p2) throws SQLException {
        delegate.setBinaryStream(p1, p2);
    }

    @Override
    public void setBlob(String p1, InputStream p2, long p3) throws SQLException {
        delegate.setBlob(p1, p2, p3);
    }

    @Override
    public void setBlob(String p1, InputStream p2) throws SQLException {
        delegate.setBlob(p1, p2);
    }

    @Override
    public void setBlob(String p1, Blob p2) throws SQLException {
        delegate.setBlob(p1, p2);
    }

    @Override
    public void setBoolean(String p1, boolean p2) throws SQLException {
        delegate.setBoolean(p1, p2);
    }

    @Override
    public void setByte(String p1, byte p2) throws SQLException {
        delegate.setByte(p1, p2);
    }

    @Override
    public void setBytes(String p1, byte[] p2) throws SQLException {
        delegate.setBytes(p1, p2);
    }

    @Override
    public void setCharacterStream(String p1, Reader p2, int p3) throws SQLException {
        delegate.setCharacterStream(p1, p2, p3);
    }

    @Override
    public void setCharacterStream(String p1, Reader p2, long p3) throws SQLException {
        delegate.setCharacterStream(p1, p2, p3);
    }

    @Override
    public void setCharacterStream(String p1, Reader p2) throws SQLException {
        delegate.setCharacterStream(p1, p2);
    }

    @Override
    public void setClob(String p1, Reader p2, long p3) throws SQLException {
        delegate.setClob(p1, p2, p3);
    }

    @Override
    public void setClob(String p1, Reader p2) throws SQLException {
        delegate.setClob(p1, p2);
    }

    @Override
    public void setClob(String p1, Clob p2) throws SQLException {
        delegate.setClob(p1, p2);
    }

    @Override
    public void setDate(String p1, Date p2, Calendar p3) throws SQLException {
        delegate.setDate(p1, p2, p3);
    }

    @Override
    public void setDate(String p1, Date p2) throws SQLException {
        delegate.setDate(p1, p2);
    }

    @Override
    public void setDouble(String p1, double p2) throws SQLException {
        delegate.setDouble(p1, p2);
    }

    @Override
    public void setFloat(String p1, float p2) throws SQLException {
        delegate.setFloat(p1, p2);
    }

    @Override
    public void setInt(String p1, int p2) throws SQLException {
        delegate.setInt(p1, p2);
    }

    @Override
    public void setLong(String p1, long p2) throws SQLException {
        delegate.setLong(p1, p2);
    }

    @Override
    public void setNCharacterStream(String p1, Reader p2, long p3) throws SQLException {
        delegate.setNCharacterStream(p1, p2, p3);
    }

    @Override
    public void setNCharacterStream(String p1, Reader p2) throws SQLException {
        delegate.setNCharacterStream(p1, p2);
    }

    @Override
    public void setNClob(String p1, Reader p2, long p3) throws SQLException {
        delegate.setNClob(p1, p2, p3);
    }

    @Override
    public void setNClob(String p1, Reader p2) throws SQLException {
        delegate.setNClob(p1, p2);
    }

    @Override
    public void setNClob(String p1, NClob p2) throws SQLException {
        delegate.setNClob(p1, p2);
    }

    @Override
    public void setNString(String p1, String p2) throws SQLException {
        delegate.setNString(p1, p2);
    }

    @Override
    public void setNull(String p1, int p2, String p3) throws SQLException {
        delegate.setNull(p1, p2, p3);
    }

    @Override
    public void setNull(String p1, int p2) throws SQLException {
        delegate.setNull(p1, p2);
    }

    @Override
    public void setObject(String p1, Object p2, int p3, int p4) throws SQLException {
        delegate.setObject(p1, p2, p3, p4);
    }

    @Override
    public void setObject(String p1, Object p2, int p3) throws SQLException {
        delegate.setObject(p1, p2, p3);
    }

    @Override
    public void setObject(String p1, Object p2, SQLType p3, int p4) throws SQLException {
        delegate.setObject(p1, p2, p3, p4);
    }

    @Override
    public void setObject(String p1, Object p2, SQLType p3) throws SQLException {
        delegate.setObject(p1, p2, p3);
    }

    @Override
    public void setObject(String p1, Object p2) throws SQLException {
        delegate.setObject(p1, p2);
    }

    @Override
    public void setRowId(String p1, RowId p2) throws SQLException {
        delegate.setRowId(p1, p2);
    }

    @Override
    public void setSQLXML(String p1, SQLXML p2) throws SQLException {
        delegate.setSQLXML(p1, p2);
    }

    @Override
    public void setShort(String p1, short p2) throws SQLException {
        delegate.setShort(p1, p2);
    }

    @Override
    public void setString(String p1, String p2) throws SQLException {
        delegate.setString(p1, p2);
    }

    @Override
    public void setTime(String p1, Time p2, Calendar p3) throws SQLException {
        delegate.setTime(p1, p2, p3);
    }

    @Override
    public void setTime(String p1, Time p2) throws SQLException {
        delegate.setTime(p1, p2);
    }

    @Override
    public void setTimestamp(String p1, Timestamp p2, Calendar p3) throws SQLException {
        delegate.setTimestamp(p1, p2, p3);
    }

    @Override
    public void setTimestamp(String p1, Timestamp p2) throws SQLException {
        delegate.setTimestamp(p1, p2);
    }

    @Override
    public void setURL(String p1, URL p2) throws SQLException {
        delegate.setURL(p1, p2);
    }

    @Override
    public boolean wasNull() throws SQLException {
        return delegate.wasNull();
    }
}
