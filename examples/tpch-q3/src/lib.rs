//! TPC-H Q3 as a program: the ten unshipped orders of highest revenue of customers of
//! the `BUILDING` segment, over three `|`-separated tables (`customer.tbl`,
//! `orders.tbl`, `lineitem.tbl`: the columns of `../shared/bench-data/README.md`).
//! Customers of the segment join their orders dated before 1995-03-15; the line items
//! shipped after that date are summed per order (revenue: price in cents × (100 −
//! discount %), exact) and joined to those orders: three shuffles. The result:
//! `{"groups": N, "rows": [[orderkey, revenue, orderdate, shippriority], …]}`, highest
//! revenue first, then earlier date, then lower key; N orders have any revenue.

use flint_guest::Error;
use flint_guest::program::{Program, text_file};
use serde::Serialize;
use std::cmp::Reverse;

/// The query's date, as the tables write dates.
const DATE: u32 = 19950315;

fn columns<const N: usize>(line: &str) -> [&str; N] {
    let mut out = [""; N];
    for (slot, field) in out.iter_mut().zip(line.split('|')) {
        *slot = field;
    }
    out
}

fn number<T: std::str::FromStr + Default>(field: &str) -> T {
    field.trim().parse().unwrap_or_default()
}

flint_guest::functions! {
    pub fn building(line: &String) -> bool { columns::<2>(line)[1] == "BUILDING" }
    /// A customer's key, with nothing else.
    pub fn customer(line: String) -> (u64, ()) { (number(columns::<1>(&line)[0]), ()) }
    /// An order as (customer, (order, date, priority)), before the date only.
    pub fn early_order(line: String) -> Vec<(u64, (u64, u32, u32))> {
        let [key, cust, date, priority] = columns::<4>(&line);
        let date: u32 = number(date);
        match date < DATE {
            true => vec![(number(cust), (number(key), date, number(priority)))],
            false => Vec::new(),
        }
    }
    /// A line item's revenue under its order's key, shipped after the date only.
    pub fn late_revenue(line: String) -> Vec<(u64, u64)> {
        let [order, price, discount, ship] = columns::<4>(&line);
        match number::<u32>(ship) > DATE {
            true => vec![(number(order), number::<u64>(price) * (100 - number::<u64>(discount).min(100)))],
            false => Vec::new(),
        }
    }
    pub fn add(a: u64, b: u64) -> u64 { a + b }
    /// A joined customer's order, keyed by the order.
    pub fn by_order(joined: (u64, ((), (u64, u32, u32)))) -> (u64, (u32, u32)) {
        let (_, ((), (order, date, priority))) = joined;
        (order, (date, priority))
    }
    /// A row of the answer: (order, revenue, date, priority).
    pub fn row(joined: (u64, ((u32, u32), u64))) -> (u64, u64, u32, u32) {
        let (order, ((date, priority), revenue)) = joined;
        (order, revenue, date, priority)
    }
    /// Highest revenue first, then earlier date, then lower key.
    pub fn ranked(row: &(u64, u64, u32, u32)) -> (Reverse<u64>, u32, u64) { (Reverse(row.1), row.2, row.0) }
}

#[derive(Serialize)]
pub struct Answer {
    pub groups: u64,
    pub rows: Vec<(u64, u64, u32, u32)>,
}

pub struct Q3;

impl Program for Q3 {
    type Result = Answer;

    fn main() -> Result<Answer, Error> {
        let customers = text_file("customer.tbl").filter(building).map(customer);
        let orders = text_file("orders.tbl").flat_map(early_order);
        let revenue = text_file("lineitem.tbl").flat_map(late_revenue).reduce_by_key(add, 0);
        let rows = customers.join(&orders, 0).map(by_order).join(&revenue, 0).map(row);
        let top = rows.take_ordered(10, ranked)?;
        Ok(Answer { groups: rows.count()?, rows: top })
    }
}

flint_guest::export_program!(Q3, [building, customer, early_order, late_revenue, add, by_order, row, ranked]);

#[cfg(test)]
mod tests {
    use super::*;
    use flint_guest::testing::{Input, Local};
    use std::collections::{HashMap, HashSet};

    fn text(path: &str, rows: &[String]) -> Input {
        Input::Text { path: path.into(), bytes: rows.join("\n").into_bytes() }
    }

    #[test]
    fn the_answer_is_what_a_plain_loop_over_the_tables_finds() {
        let segments = ["AUTOMOBILE", "BUILDING", "FURNITURE"];
        let customers: Vec<String> =
            (1..=60).map(|c| format!("{c}|{}|{}", segments[c % 3], c % 25)).collect();
        let orders: Vec<String> = (1..=300u64)
            .map(|o| format!("{}|{}|{}|0", o * 4 - o % 4, 1 + o * 7 % 60, 19950300 + o % 30))
            .collect();
        let items: Vec<String> = (0..1500u64)
            .map(|i| {
                let order = (1 + i * 13 % 300) * 4 - (1 + i * 13 % 300) % 4;
                format!("{order}|{}|{}|{}", 100_000 + i * 977 % 90_000, i % 11, 19950301 + i % 40)
            })
            .collect();
        let out = Local::new()
            .program::<Q3>([
                text("customer.tbl", &customers),
                text("orders.tbl", &orders),
                text("lineitem.tbl", &items),
            ])
            .unwrap();
        // The same query, as loops.
        let building: HashSet<u64> = customers
            .iter()
            .filter(|c| c.split('|').nth(1) == Some("BUILDING"))
            .map(|c| c.split('|').next().unwrap().parse().unwrap())
            .collect();
        let mut open: HashMap<u64, (u32, u32)> = HashMap::new();
        for o in &orders {
            let f: Vec<u64> = o.split('|').map(|x| x.parse().unwrap()).collect();
            if building.contains(&f[1]) && f[2] < 19950315 {
                open.insert(f[0], (f[2] as u32, f[3] as u32));
            }
        }
        let mut revenue: HashMap<u64, u64> = HashMap::new();
        for l in &items {
            let f: Vec<u64> = l.split('|').map(|x| x.parse().unwrap()).collect();
            if f[3] > 19950315 && open.contains_key(&f[0]) {
                *revenue.entry(f[0]).or_default() += f[1] * (100 - f[2]);
            }
        }
        let mut rows: Vec<(u64, u64, u32, u32)> =
            revenue.iter().map(|(o, r)| (*o, *r, open[o].0, open[o].1)).collect();
        rows.sort_by_key(|r| (Reverse(r.1), r.2, r.0));
        rows.truncate(10);
        assert!(revenue.len() > 10, "the data makes more groups than rows");
        assert_eq!(out.result["groups"], revenue.len());
        assert_eq!(out.result["rows"], serde_json::json!(rows));
    }
}
