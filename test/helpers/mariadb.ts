/** The MariaDB/MySQL the `mysql` target's tests use: 127.0.0.1:3306, root, no password. */
import mysql from 'mysql2/promise';

export const MARIADB_ADMIN = { host: '127.0.0.1', port: 3306, user: 'root', password: '' } as const;

/** Whether that server answers (the tests skip with a reason when it does not). */
export async function mariadbAnswers(): Promise<boolean> {
  try {
    const c = await mysql.createConnection({ ...MARIADB_ADMIN, connectTimeout: 1500 });
    await c.end();
    return true;
  } catch {
    return false;
  }
}

/** A new database `dbName` with a table orders (id, total) of `rows` rows, id and total 1 … rows. */
export async function createOrdersDatabase(admin: mysql.Connection, dbName: string, rows: number): Promise<void> {
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.query(`CREATE TABLE ${dbName}.orders (id INT PRIMARY KEY, total INT NOT NULL)`);
  await admin.query(`INSERT INTO ${dbName}.orders VALUES ${Array.from({ length: rows }, (_, i) => `(${i + 1}, ${i + 1})`).join(',')}`);
}
