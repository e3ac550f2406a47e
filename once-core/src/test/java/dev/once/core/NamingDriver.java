package dev.once.core;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.SQLException;
import java.util.List;
import javax.sql.DataSource;

/**
 * A DataSource whose connections' metadata name another JDBC driver of the same database, and which record the
 * strings they prepare: for the places where once asks the driver's name ({@code Dialect#statementsTogether})
 * before it sends several statements in one prepared string.
 */
final class NamingDriver {

    /** pgjdbc's name ({@code org.postgresql.util.DriverInfo.DRIVER_NAME}). */
    static final String PGJDBC = "PostgreSQL JDBC Driver";

    private NamingDriver() {}

    /**
     * {@code ds} whose connections' metadata name {@code driver}, recording the strings they prepare into {@code
     * prepared} and, unless the driver is pgjdbc, refusing a string of several statements as such a driver may
     * ("cannot insert multiple commands into a prepared statement", 42601).
     */
    static DataSource of(DataSource ds, String driver, List<String> prepared) {
        boolean refusesSeveral = !driver.equals(PGJDBC);
        ClassLoader loader = NamingDriver.class.getClassLoader();
        return (DataSource) Proxy.newProxyInstance(loader, new Class<?>[] {DataSource.class}, (p, m, a) -> {
            Object r = invoke(ds, m, a);
            if (!(r instanceof Connection c)) {
                return r;
            }
            return Proxy.newProxyInstance(loader, new Class<?>[] {Connection.class}, (cp, cm, ca) -> {
                if (cm.getName().equals("prepareStatement") && ca[0] instanceof String sql) {
                    prepared.add(sql);
                    if (refusesSeveral && sql.contains("; ")) {
                        throw new SQLException("cannot insert multiple commands into a prepared statement", "42601");
                    }
                }
                Object cr = invoke(c, cm, ca);
                if (!(cr instanceof DatabaseMetaData md)) {
                    return cr;
                }
                return Proxy.newProxyInstance(
                        loader,
                        new Class<?>[] {DatabaseMetaData.class},
                        (mp, mm, ma) -> mm.getName().equals("getDriverName") ? driver : invoke(md, mm, ma));
            });
        });
    }

    private static Object invoke(Object target, Method m, Object[] a) throws Throwable {
        try {
            return m.invoke(target, a);
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
    }
}
