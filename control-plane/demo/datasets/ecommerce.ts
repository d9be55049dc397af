/**
 * demo-ecommerce: a direct-to-consumer online store: customers, catalogue, orders with line
 * items, and product reviews. Orders follow signups, peak around Black Friday and December,
 * and move through payment, shipping and delivery; totals add up from their lines.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, WeightedIndex, at, col, iso, isoDate, round2 } from '../rng.js';

const TARGET_ID = 'demo-ecommerce';
const N_CUSTOMERS = 2000;

interface BaseProduct {
  readonly name: string;
  readonly category: string;
  readonly brand: string;
  readonly price: readonly [number, number];
  readonly variants: 'color' | 'size' | 'none';
}

const BASE_PRODUCTS: readonly BaseProduct[] = [
  { name: 'Merino Crew Sweater', category: 'Apparel', brand: 'Harbor & Pine', price: [79, 119], variants: 'color' },
  { name: 'Organic Cotton Tee', category: 'Apparel', brand: 'Harbor & Pine', price: [22, 32], variants: 'color' },
  { name: 'Slim Chino Pants', category: 'Apparel', brand: 'Harbor & Pine', price: [58, 78], variants: 'color' },
  { name: 'Packable Rain Shell', category: 'Apparel', brand: 'Trailhead Co', price: [99, 149], variants: 'color' },
  { name: 'Wool Beanie', category: 'Apparel', brand: 'Trailhead Co', price: [24, 34], variants: 'color' },
  { name: 'Trail Running Socks (3-pack)', category: 'Apparel', brand: 'Trailhead Co', price: [18, 26], variants: 'size' },
  { name: 'Fleece Quarter-Zip', category: 'Apparel', brand: 'Trailhead Co', price: [59, 79], variants: 'color' },
  { name: 'Trail Runner 2', category: 'Footwear', brand: 'Trailhead Co', price: [119, 149], variants: 'size' },
  { name: 'Canvas Low-Top Sneaker', category: 'Footwear', brand: 'Harbor & Pine', price: [55, 75], variants: 'size' },
  { name: 'Leather Chelsea Boot', category: 'Footwear', brand: 'Harbor & Pine', price: [159, 219], variants: 'size' },
  { name: 'Recovery Slide', category: 'Footwear', brand: 'Trailhead Co', price: [35, 49], variants: 'size' },
  { name: 'Cast Iron Skillet 10in', category: 'Home & Kitchen', brand: 'Lumen Home', price: [34, 49], variants: 'none' },
  { name: 'Pour-Over Coffee Kettle', category: 'Home & Kitchen', brand: 'Lumen Home', price: [42, 69], variants: 'color' },
  { name: 'Linen Napkin Set (4)', category: 'Home & Kitchen', brand: 'Lumen Home', price: [28, 39], variants: 'color' },
  { name: 'Stoneware Dinner Plate Set (4)', category: 'Home & Kitchen', brand: 'Lumen Home', price: [48, 72], variants: 'color' },
  { name: "Chef's Knife 8in", category: 'Home & Kitchen', brand: 'Lumen Home', price: [69, 129], variants: 'none' },
  { name: 'Bamboo Cutting Board', category: 'Home & Kitchen', brand: 'Lumen Home', price: [19, 34], variants: 'none' },
  { name: 'Waffle Bath Towel', category: 'Home & Kitchen', brand: 'Lumen Home', price: [26, 38], variants: 'color' },
  { name: 'Wireless Earbuds', category: 'Electronics', brand: 'Voltcraft', price: [59, 129], variants: 'color' },
  { name: 'USB-C Charger 65W', category: 'Electronics', brand: 'Voltcraft', price: [29, 45], variants: 'none' },
  { name: 'Bluetooth Speaker Mini', category: 'Electronics', brand: 'Voltcraft', price: [39, 59], variants: 'color' },
  { name: 'Smart LED Bulb (2-pack)', category: 'Electronics', brand: 'Voltcraft', price: [19, 29], variants: 'none' },
  { name: 'Noise-Cancelling Headphones', category: 'Electronics', brand: 'Voltcraft', price: [149, 249], variants: 'color' },
  { name: 'Portable Power Bank 20000mAh', category: 'Electronics', brand: 'Voltcraft', price: [39, 59], variants: 'none' },
  { name: 'Insulated Water Bottle 32oz', category: 'Outdoor', brand: 'Trailhead Co', price: [29, 39], variants: 'color' },
  { name: 'Ultralight Daypack 22L', category: 'Outdoor', brand: 'Trailhead Co', price: [69, 99], variants: 'color' },
  { name: 'Folding Camp Chair', category: 'Outdoor', brand: 'Trailhead Co', price: [45, 65], variants: 'color' },
  { name: 'Rechargeable Headlamp 400lm', category: 'Outdoor', brand: 'Trailhead Co', price: [32, 45], variants: 'none' },
  { name: '2-Person Backpacking Tent', category: 'Outdoor', brand: 'Trailhead Co', price: [229, 329], variants: 'none' },
  { name: 'Daily Moisturizer SPF 30', category: 'Beauty', brand: 'Glow Botanics', price: [18, 32], variants: 'none' },
  { name: 'Vitamin C Serum', category: 'Beauty', brand: 'Glow Botanics', price: [24, 42], variants: 'none' },
  { name: 'Lip Balm Trio', category: 'Beauty', brand: 'Glow Botanics', price: [9, 14], variants: 'none' },
  { name: 'Solid Shampoo Bar', category: 'Beauty', brand: 'Glow Botanics', price: [12, 16], variants: 'none' },
  { name: 'Gift Card', category: 'Gift Cards', brand: 'Store', price: [25, 25], variants: 'none' },
];

const COLORS = ['Black', 'Navy', 'Heather Grey', 'Forest', 'Rust', 'Oat', 'Sky'] as const;
const SIZES = ['S', 'M', 'L', 'XL'] as const;
const SHOE_SIZES = ['7', '8', '9', '10', '11', '12'] as const;

const REVIEW_TITLES: Record<number, readonly string[]> = {
  5: ['Love it', 'Exactly as described', 'Best purchase this year', 'Great quality', 'Would buy again', 'Perfect gift'],
  4: ['Very good', 'Nice, runs a little small', 'Solid value', 'Happy with it', 'Good but pricey'],
  3: ['It is okay', 'Mixed feelings', 'Average quality', 'Does the job'],
  2: ['Disappointed', 'Not as pictured', 'Quality could be better', 'Fit was off'],
  1: ['Broke after a week', 'Returned it', 'Poor quality', 'Arrived damaged'],
};

const TABLES: readonly TableDef[] = [
  {
    name: 'customers',
    description: 'Registered customers of the store.',
    primaryKey: 'customer_id',
    timeColumn: 'signup_at',
    columns: [
      col('customer_id', 'integer', 'Customer id.'),
      col('email', 'text', 'E-mail address (example domains).'),
      col('first_name', 'text', 'First name.'),
      col('last_name', 'text', 'Last name.'),
      col('country', 'text', 'Country (ISO 3166-1 alpha-2).'),
      col('city', 'text', 'City of the default shipping address.'),
      col('signup_at', 'timestamptz', 'When the account was created.'),
      col('acquisition_channel', 'text', 'Channel that brought the customer: organic_search | paid_search | social | email | referral | direct | affiliate.'),
      col('marketing_opt_in', 'boolean', 'Whether the customer accepts marketing e-mail.'),
      col('loyalty_tier', 'text', 'Tier from lifetime net spend: none | silver (>= 250) | gold (>= 750) | platinum (>= 2000).'),
    ],
  },
  {
    name: 'products',
    description: 'The product catalogue (one row per sellable variant / SKU).',
    primaryKey: 'product_id',
    columns: [
      col('product_id', 'integer', 'Product (SKU) id.'),
      col('sku', 'text', 'Stock keeping unit code.'),
      col('name', 'text', 'Product name including its variant.'),
      col('category', 'text', 'Merchandising category.'),
      col('brand', 'text', 'Brand.'),
      col('unit_price', 'numeric', 'Current list price, USD.'),
      col('unit_cost', 'numeric', 'Landed unit cost, USD.'),
      col('active', 'boolean', 'Whether the SKU is currently sold.'),
      col('launched_on', 'date', 'Date the SKU was first offered (may precede the data span).'),
    ],
  },
  {
    name: 'orders',
    description: 'Customer orders with their money totals (subtotal - discount + shipping + tax = total) and fulfilment status.',
    primaryKey: 'order_id',
    timeColumn: 'placed_at',
    columns: [
      col('order_id', 'integer', 'Order id, increasing with placed_at.'),
      col('customer_id', 'integer', 'The customer (customers.customer_id).'),
      col('placed_at', 'timestamptz', 'When the order was placed.'),
      col('status', 'text', 'pending | paid | shipped | delivered | cancelled | returned.'),
      col('channel', 'text', 'Sales channel: web | mobile_app | marketplace.'),
      col('currency', 'text', 'ISO 4217 currency of all amounts (USD).'),
      col('item_count', 'integer', 'Number of units ordered.'),
      col('subtotal', 'numeric', 'Sum of quantity x unit price over the lines, USD.'),
      col('discount', 'numeric', 'Total discount applied, USD.'),
      col('shipping_fee', 'numeric', 'Shipping charged, USD (free over 75 USD).'),
      col('tax', 'numeric', 'Sales tax, USD.'),
      col('total', 'numeric', 'Amount charged, USD.'),
      col('promo_code', 'text', 'Promotion code used, if any.', true),
      col('shipping_country', 'text', 'Destination country (ISO 3166-1 alpha-2).'),
      col('shipped_at', 'timestamptz', 'When the parcel left the warehouse.', true),
      col('delivered_at', 'timestamptz', 'When the carrier confirmed delivery.', true),
    ],
  },
  {
    name: 'order_items',
    description: 'Order lines: product, quantity, price and line discount.',
    primaryKey: 'order_item_id',
    timeColumn: 'ordered_at',
    columns: [
      col('order_item_id', 'integer', 'Order line id.'),
      col('order_id', 'integer', 'The order (orders.order_id).'),
      col('product_id', 'integer', 'The product (products.product_id).'),
      col('quantity', 'integer', 'Units ordered.'),
      col('unit_price', 'numeric', 'Unit price charged, USD (after any sale price).'),
      col('discount_amount', 'numeric', 'Promotion discount allocated to this line, USD.'),
      col('line_total', 'numeric', 'quantity x unit_price - discount_amount, USD.'),
      col('ordered_at', 'timestamptz', 'When the order was placed (copied from orders.placed_at).'),
    ],
  },
  {
    name: 'product_reviews',
    description: 'Product reviews left by customers after delivery.',
    primaryKey: 'review_id',
    timeColumn: 'created_at',
    columns: [
      col('review_id', 'integer', 'Review id.'),
      col('product_id', 'integer', 'The product reviewed (products.product_id).'),
      col('customer_id', 'integer', 'The reviewer (customers.customer_id).'),
      col('order_id', 'integer', 'The order the product came from (orders.order_id).'),
      col('rating', 'integer', 'Star rating 1-5.'),
      col('title', 'text', 'Review headline.'),
      col('created_at', 'timestamptz', 'When the review was posted.'),
      col('verified_purchase', 'boolean', 'Always true here: every review is tied to a delivered order.'),
    ],
  },
];

/** Relative order volume per month (0 = January): Black Friday / holiday peak, summer lull. */
const MONTH_WEIGHT = [0.8, 0.7, 0.85, 0.9, 0.95, 0.85, 0.8, 0.85, 0.9, 1.0, 1.6, 1.8] as const;

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);
  const END = SPAN_END_MS - MINUTE;

  // --- products -------------------------------------------------------------------------
  interface Product { id: number; base: BaseProduct; price: number; cost: number; active: boolean }
  const products: Product[] = [];
  const productRows: Cell[][] = [];
  BASE_PRODUCTS.forEach((b, bi) => {
    const variants: readonly string[] =
      b.variants === 'color' ? rng.sample(COLORS, rng.int(3, 6))
      : b.variants === 'size' ? (b.category === 'Footwear' ? SHOE_SIZES : SIZES)
      : [''];
    const price = b.price[0] === b.price[1] ? b.price[0] : Math.round(rng.float(b.price[0], b.price[1])) - 0.01;
    for (const v of variants) {
      const id = products.length + 1;
      const cost = b.category === 'Gift Cards' ? price : round2(price * rng.float(0.32, 0.55));
      const active = !rng.chance(0.06);
      products.push({ id, base: b, price, cost, active });
      const prefix = b.category.slice(0, 3).toUpperCase().replace(/[^A-Z]/g, 'X');
      const sku = `${prefix}-${String(bi + 1).padStart(3, '0')}${v ? `-${v.replace(/[^A-Za-z0-9]/g, '').slice(0, 4).toUpperCase()}` : ''}`;
      const launched = rng.chance(0.7) ? Date.UTC(2020, 0, 1) + rng.int(0, 1090) * DAY : SPAN_START_MS + rng.int(0, 900) * DAY;
      productRows.push([id, sku, v ? `${b.name} - ${v}` : b.name, b.category, b.brand, price, cost, active, isoDate(launched)]);
    }
  });
  const productPick = new WeightedIndex(products.map((p) => (p.base.category === 'Gift Cards' ? 0.6 : 1) * rng.logNormal(1, 0.8, 0.1, 8)));
  const launchedAt = productRows.map((r) => Date.parse(String(r[8])));

  // --- customers ------------------------------------------------------------------------
  interface Customer { id: number; signup: number; country: string; propensity: number; spend: number }
  const customers: Customer[] = [];
  const customerRows: Cell[][] = [];
  const signups = Array.from({ length: N_CUSTOMERS }, () => rng.trendingTimeMs(SPAN_START_MS, SPAN_END_MS - 3 * DAY, 0.6)).sort((a, b) => a - b);
  signups.forEach((signup, i) => {
    const first = rng.firstName();
    const last = rng.lastName();
    const country = rng.pick(['US', 'US', 'US', 'US', 'US', 'US', 'CA', 'CA', 'GB', 'AU', 'DE', 'NL', 'IE']);
    const city = country === 'US' ? rng.usPlace().city : rng.pick(CITY_BY_COUNTRY[country] ?? ['Toronto']);
    const c: Customer = { id: i + 1, signup, country, propensity: rng.logNormal(1, 0.9, 0.1, 12), spend: 0 };
    customers.push(c);
    customerRows.push([
      c.id, rng.email(first, last), first, last, country, city, iso(signup),
      rng.weighted<string>([['organic_search', 28], ['paid_search', 20], ['social', 18], ['email', 8], ['referral', 10], ['direct', 12], ['affiliate', 4]]),
      rng.chance(0.58), 'none',
    ]);
  });

  // --- orders ----------------------------------------------------------------------------
  interface OrderDraft { at: number; customer: Customer; seq: number }
  const drafts: OrderDraft[] = [];
  let seq = 0;
  for (const c of customers) {
    if (rng.chance(0.18)) continue; // never ordered
    const remainingYears = (END - c.signup) / (365 * DAY);
    const n = 1 + rng.poisson(Math.min(12, c.propensity * 1.2 * remainingYears));
    // First order usually within a day of signup.
    const firstAt = c.signup + (rng.chance(0.6) ? rng.int(5, 90) * MINUTE : rng.int(1, 20) * DAY + rng.int(0, 23) * HOUR);
    if (firstAt < END) drafts.push({ at: firstAt, customer: c, seq: seq++ });
    for (let k = 1; k < n; k++) {
      for (let tries = 0; tries < 6; tries++) {
        const t = rng.businessTimeMs(c.signup + DAY, END, 0.2, 0.9);
        const w = MONTH_WEIGHT[new Date(t).getUTCMonth()] ?? 1;
        if (rng.next() * 1.8 < w) {
          drafts.push({ at: t, customer: c, seq: seq++ });
          break;
        }
      }
    }
  }
  drafts.sort((a, b) => a.at - b.at || a.seq - b.seq);

  const orderRows: Cell[][] = [];
  const itemRows: Cell[][] = [];
  const reviewRows: Cell[][] = [];
  const reviewed = new Set<string>();
  interface ReviewDraft { at: number; productId: number; customerId: number; orderId: number; rating: number; seq: number }
  const reviewDrafts: ReviewDraft[] = [];
  let itemId = 0;
  drafts.forEach((d, i) => {
    const orderId = 100_001 + i;
    const c = d.customer;
    const date = new Date(d.at);
    const month = date.getUTCMonth();
    const isBlackFriday = month === 10 && date.getUTCDate() >= 22;
    const promo =
      isBlackFriday && rng.chance(0.6) ? 'BFCM25'
      : c.spend === 0 && rng.chance(0.35) ? 'WELCOME10'
      : rng.chance(0.06) ? rng.pick(['SPRING15', 'FREESHIP', 'FRIENDS20'])
      : null;
    const pct = promo === 'BFCM25' ? 0.25 : promo === 'WELCOME10' ? 0.1 : promo === 'SPRING15' ? 0.15 : promo === 'FRIENDS20' ? 0.2 : 0;
    const nLines = rng.weighted<number>([[1, 45], [2, 28], [3, 15], [4, 8], [5, 4]]);
    const lines: { product: Product; qty: number; price: number; disc: number }[] = [];
    const used = new Set<number>();
    for (let k = 0; k < nLines; k++) {
      let p = at(products, productPick.pick(rng));
      for (let tries = 0; tries < 5 && (used.has(p.id) || !p.active || (launchedAt[p.id - 1] ?? 0) > d.at); tries++) p = at(products, productPick.pick(rng));
      if (used.has(p.id)) continue;
      used.add(p.id);
      const qty = p.base.category === 'Gift Cards' ? rng.int(1, 4) : rng.weighted<number>([[1, 80], [2, 15], [3, 5]]);
      const onSale = p.base.category !== 'Gift Cards' && rng.chance(isBlackFriday ? 0 : 0.08);
      const price = onSale ? round2(p.price * 0.8) : p.price;
      const disc = p.base.category === 'Gift Cards' ? 0 : round2(qty * price * pct);
      lines.push({ product: p, qty, price, disc });
    }
    const subtotal = round2(lines.reduce((s, l) => s + l.qty * l.price, 0));
    const discount = round2(lines.reduce((s, l) => s + l.disc, 0));
    const net = round2(subtotal - discount);
    const shipping = promo === 'FREESHIP' || net >= 75 || lines.every((l) => l.product.base.category === 'Gift Cards') ? 0 : c.country === 'US' ? 6.95 : 14.95;
    const taxRate = c.country === 'US' ? rng.pick([0, 0.0625, 0.07, 0.0725, 0.08, 0.0875, 0.06]) : 0;
    const tax = round2(net * taxRate);
    const total = round2(net + shipping + tax);
    const placed = d.at;
    let status: string;
    let shipped: number | null = null;
    let delivered: number | null = null;
    if (rng.chance(0.03)) status = 'cancelled';
    else {
      const ship = placed + Math.round(rng.logNormal(26, 0.5, 3, 120)) * HOUR;
      if (placed > END - 6 * HOUR && rng.chance(0.5)) status = 'pending';
      else if (ship >= END) status = 'paid';
      else {
        shipped = ship;
        const deliver = ship + Math.round(rng.logNormal(c.country === 'US' ? 3 : 7, 0.35, 1, 20) * 24 - rng.int(0, 12)) * HOUR;
        if (deliver >= END) status = 'shipped';
        else {
          delivered = deliver;
          const apparel = lines.some((l) => l.product.base.category === 'Apparel' || l.product.base.category === 'Footwear');
          status = rng.chance(apparel ? 0.09 : 0.03) ? 'returned' : 'delivered';
        }
      }
    }
    if (status !== 'cancelled' && status !== 'returned') c.spend += net;
    orderRows.push([
      orderId, c.id, iso(placed), status, rng.weighted<string>([['web', 55], ['mobile_app', 35], ['marketplace', 10]]), 'USD',
      lines.reduce((s, l) => s + l.qty, 0), subtotal, discount, shipping, tax, total, promo, c.country,
      shipped === null ? null : iso(shipped), delivered === null ? null : iso(delivered),
    ]);
    for (const l of lines) {
      itemId++;
      itemRows.push([itemId, orderId, l.product.id, l.qty, l.price, l.disc, round2(l.qty * l.price - l.disc), iso(placed)]);
      if (delivered !== null && status === 'delivered' && l.product.base.category !== 'Gift Cards' && rng.chance(0.22)) {
        const key = `${c.id}:${l.product.id}`;
        const t = delivered + rng.int(2, 40) * DAY + rng.int(0, 23) * HOUR;
        if (!reviewed.has(key) && t < END) {
          reviewed.add(key);
          const rating = rng.weighted<number>([[5, 46], [4, 26], [3, 11], [2, 7], [1, 10]]);
          reviewDrafts.push({ at: t, productId: l.product.id, customerId: c.id, orderId, rating, seq: seq++ });
        }
      }
    }
  });
  reviewDrafts.sort((a, b) => a.at - b.at || a.seq - b.seq);
  reviewDrafts.forEach((r, i) => {
    reviewRows.push([i + 1, r.productId, r.customerId, r.orderId, r.rating, rng.pick(REVIEW_TITLES[r.rating] ?? ['Review']), iso(r.at), true]);
  });

  for (const row of customerRows) {
    const c = at(customers, Number(row[0]) - 1);
    row[9] = c.spend >= 2000 ? 'platinum' : c.spend >= 750 ? 'gold' : c.spend >= 250 ? 'silver' : 'none';
  }

  return new Map<string, Cell[][]>([
    ['customers', customerRows],
    ['products', productRows],
    ['orders', orderRows],
    ['order_items', itemRows],
    ['product_reviews', reviewRows],
  ]);
}

const CITY_BY_COUNTRY: Record<string, readonly string[]> = {
  CA: ['Toronto', 'Vancouver', 'Montreal', 'Calgary', 'Ottawa'],
  GB: ['London', 'Manchester', 'Bristol', 'Edinburgh', 'Leeds'],
  AU: ['Sydney', 'Melbourne', 'Brisbane', 'Perth'],
  DE: ['Berlin', 'Hamburg', 'Munich', 'Cologne'],
  NL: ['Amsterdam', 'Rotterdam', 'Utrecht'],
  IE: ['Dublin', 'Cork', 'Galway'],
};

export const ecommerce: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'commerce',
  name: 'E-commerce store',
  description:
    'A synthetic direct-to-consumer online store, 2023-2025: customers, product catalogue, orders with line items (totals reconcile), fulfilment timestamps, seasonal peaks and product reviews.',
  schema: 'demo_ecommerce',
  tables: TABLES,
  generate,
};
