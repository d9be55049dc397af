/**
 * demo-pharmacy: a retail / mail-order / specialty pharmacy chain's prescriptions and fills,
 * shaped after FHIR MedicationRequest / MedicationDispense with NCPDP-style claim pricing.
 * Chronic therapies are refilled on a days-supply cadence with realistic adherence gaps;
 * acute therapies are one-off fills; Schedule II prescriptions carry no refills.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import { DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, at, col, iso, isoDate, npi, pad, round2, textId } from '../rng.js';

const TARGET_ID = 'demo-pharmacy';
const N_PATIENTS = 800;
const N_ACUTE_RX = 2300;

interface Drug {
  readonly generic: string;
  readonly brand: string | null;
  readonly strength: string;
  readonly form: 'tablet' | 'capsule' | 'inhaler' | 'pen injector' | 'nasal spray' | 'film' | 'orally disintegrating tablet' | 'tablet pack';
  readonly route: 'oral' | 'inhalation' | 'subcutaneous' | 'nasal' | 'sublingual';
  readonly drugClass: string;
  readonly schedule: 'CII' | 'CIII' | 'CIV' | 'CV' | null;
  /** acquisition cost per dispensing unit, USD */
  readonly unitCost: number;
  readonly specialty?: boolean;
  /** chronic therapy: units per day (30- or 90-day fills) */
  readonly chronic?: number;
  /** chronic therapy dispensed in packages: fixed quantity and days supply per fill */
  readonly pack?: readonly [number, number];
  /** acute therapy: fixed quantity and days supply */
  readonly acute?: readonly [number, number];
  readonly sig: string;
  readonly weight: number;
}

const DRUGS: readonly Drug[] = [
  { generic: 'atorvastatin', brand: null, strength: '20 mg', form: 'tablet', route: 'oral', drugClass: 'HMG-CoA reductase inhibitor (statin)', schedule: null, unitCost: 0.08, chronic: 1, sig: 'Take 1 tablet by mouth once daily at bedtime', weight: 10 },
  { generic: 'atorvastatin', brand: null, strength: '40 mg', form: 'tablet', route: 'oral', drugClass: 'HMG-CoA reductase inhibitor (statin)', schedule: null, unitCost: 0.11, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 6 },
  { generic: 'rosuvastatin', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'HMG-CoA reductase inhibitor (statin)', schedule: null, unitCost: 0.12, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 4 },
  { generic: 'lisinopril', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'ACE inhibitor', schedule: null, unitCost: 0.05, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 10 },
  { generic: 'losartan potassium', brand: null, strength: '50 mg', form: 'tablet', route: 'oral', drugClass: 'Angiotensin II receptor blocker', schedule: null, unitCost: 0.09, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 7 },
  { generic: 'amlodipine besylate', brand: null, strength: '5 mg', form: 'tablet', route: 'oral', drugClass: 'Calcium channel blocker', schedule: null, unitCost: 0.05, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 8 },
  { generic: 'hydrochlorothiazide', brand: null, strength: '25 mg', form: 'tablet', route: 'oral', drugClass: 'Thiazide diuretic', schedule: null, unitCost: 0.03, chronic: 1, sig: 'Take 1 tablet by mouth every morning', weight: 4 },
  { generic: 'metoprolol succinate ER', brand: null, strength: '50 mg', form: 'tablet', route: 'oral', drugClass: 'Beta blocker', schedule: null, unitCost: 0.2, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 6 },
  { generic: 'metformin hydrochloride', brand: null, strength: '500 mg', form: 'tablet', route: 'oral', drugClass: 'Biguanide', schedule: null, unitCost: 0.04, chronic: 2, sig: 'Take 1 tablet by mouth twice daily with meals', weight: 9 },
  { generic: 'empagliflozin', brand: 'Jardiance', strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'SGLT2 inhibitor', schedule: null, unitCost: 19.5, chronic: 1, sig: 'Take 1 tablet by mouth once daily in the morning', weight: 3 },
  { generic: 'semaglutide', brand: 'Ozempic', strength: '1 mg/dose (4 mg/3 mL)', form: 'pen injector', route: 'subcutaneous', drugClass: 'GLP-1 receptor agonist', schedule: null, unitCost: 935, pack: [1, 28], sig: 'Inject 1 mg under the skin once weekly', weight: 3 },
  { generic: 'insulin glargine', brand: 'Lantus SoloStar', strength: '100 units/mL (3 mL pen)', form: 'pen injector', route: 'subcutaneous', drugClass: 'Long-acting insulin', schedule: null, unitCost: 9.8, pack: [15, 75], sig: 'Inject 20 units under the skin at bedtime', weight: 2 },
  { generic: 'levothyroxine sodium', brand: null, strength: '50 mcg', form: 'tablet', route: 'oral', drugClass: 'Thyroid hormone', schedule: null, unitCost: 0.15, chronic: 1, sig: 'Take 1 tablet by mouth every morning on an empty stomach', weight: 7 },
  { generic: 'omeprazole', brand: null, strength: '20 mg', form: 'capsule', route: 'oral', drugClass: 'Proton pump inhibitor', schedule: null, unitCost: 0.1, chronic: 1, sig: 'Take 1 capsule by mouth once daily before breakfast', weight: 6 },
  { generic: 'pantoprazole sodium', brand: null, strength: '40 mg', form: 'tablet', route: 'oral', drugClass: 'Proton pump inhibitor', schedule: null, unitCost: 0.12, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 4 },
  { generic: 'sertraline hydrochloride', brand: null, strength: '50 mg', form: 'tablet', route: 'oral', drugClass: 'Selective serotonin reuptake inhibitor', schedule: null, unitCost: 0.07, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 6 },
  { generic: 'escitalopram oxalate', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'Selective serotonin reuptake inhibitor', schedule: null, unitCost: 0.08, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 5 },
  { generic: 'bupropion hydrochloride XL', brand: null, strength: '150 mg', form: 'tablet', route: 'oral', drugClass: 'Aminoketone antidepressant', schedule: null, unitCost: 0.3, chronic: 1, sig: 'Take 1 tablet by mouth every morning', weight: 3 },
  { generic: 'trazodone hydrochloride', brand: null, strength: '50 mg', form: 'tablet', route: 'oral', drugClass: 'Serotonin modulator', schedule: null, unitCost: 0.06, chronic: 1, sig: 'Take 1 tablet by mouth at bedtime as needed for sleep', weight: 3 },
  { generic: 'gabapentin', brand: null, strength: '300 mg', form: 'capsule', route: 'oral', drugClass: 'Anticonvulsant', schedule: null, unitCost: 0.08, chronic: 3, sig: 'Take 1 capsule by mouth three times daily', weight: 4 },
  { generic: 'montelukast sodium', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'Leukotriene receptor antagonist', schedule: null, unitCost: 0.1, chronic: 1, sig: 'Take 1 tablet by mouth every evening', weight: 3 },
  { generic: 'albuterol sulfate HFA', brand: null, strength: '90 mcg/actuation (8.5 g)', form: 'inhaler', route: 'inhalation', drugClass: 'Short-acting beta agonist', schedule: null, unitCost: 28, acute: [1, 25], sig: 'Inhale 2 puffs by mouth every 4 to 6 hours as needed for wheezing', weight: 5 },
  { generic: 'apixaban', brand: 'Eliquis', strength: '5 mg', form: 'tablet', route: 'oral', drugClass: 'Factor Xa inhibitor (anticoagulant)', schedule: null, unitCost: 8.9, chronic: 2, sig: 'Take 1 tablet by mouth twice daily', weight: 3 },
  { generic: 'clopidogrel', brand: null, strength: '75 mg', form: 'tablet', route: 'oral', drugClass: 'P2Y12 platelet inhibitor', schedule: null, unitCost: 0.1, chronic: 1, sig: 'Take 1 tablet by mouth once daily', weight: 2 },
  { generic: 'tamsulosin hydrochloride', brand: null, strength: '0.4 mg', form: 'capsule', route: 'oral', drugClass: 'Alpha-1 blocker', schedule: null, unitCost: 0.09, chronic: 1, sig: 'Take 1 capsule by mouth 30 minutes after the same meal each day', weight: 3 },
  { generic: 'norethindrone acetate and ethinyl estradiol', brand: null, strength: '1 mg/20 mcg (28-day pack)', form: 'tablet pack', route: 'oral', drugClass: 'Combined oral contraceptive', schedule: null, unitCost: 9, pack: [1, 28], sig: 'Take 1 tablet by mouth daily', weight: 3 },
  { generic: 'adalimumab', brand: 'Humira Pen', strength: '40 mg/0.4 mL', form: 'pen injector', route: 'subcutaneous', drugClass: 'TNF blocker', schedule: null, unitCost: 3450, specialty: true, pack: [2, 28], sig: 'Inject 40 mg under the skin every other week', weight: 1 },
  { generic: 'methylphenidate hydrochloride ER', brand: null, strength: '36 mg', form: 'tablet', route: 'oral', drugClass: 'CNS stimulant', schedule: 'CII', unitCost: 2.1, chronic: 1, sig: 'Take 1 tablet by mouth every morning', weight: 2 },
  { generic: 'buprenorphine and naloxone', brand: null, strength: '8 mg/2 mg', form: 'film', route: 'sublingual', drugClass: 'Partial opioid agonist', schedule: 'CIII', unitCost: 4.2, chronic: 2, sig: 'Dissolve 1 film under the tongue twice daily', weight: 1 },
  { generic: 'amoxicillin', brand: null, strength: '500 mg', form: 'capsule', route: 'oral', drugClass: 'Penicillin antibiotic', schedule: null, unitCost: 0.12, acute: [30, 10], sig: 'Take 1 capsule by mouth three times daily for 10 days', weight: 10 },
  { generic: 'amoxicillin and clavulanate potassium', brand: null, strength: '875 mg/125 mg', form: 'tablet', route: 'oral', drugClass: 'Penicillin antibiotic', schedule: null, unitCost: 0.55, acute: [20, 10], sig: 'Take 1 tablet by mouth twice daily for 10 days', weight: 5 },
  { generic: 'azithromycin', brand: null, strength: '250 mg', form: 'tablet', route: 'oral', drugClass: 'Macrolide antibiotic', schedule: null, unitCost: 0.9, acute: [6, 5], sig: 'Take 2 tablets by mouth on day 1, then 1 tablet daily on days 2 to 5', weight: 6 },
  { generic: 'cephalexin', brand: null, strength: '500 mg', form: 'capsule', route: 'oral', drugClass: 'Cephalosporin antibiotic', schedule: null, unitCost: 0.2, acute: [28, 7], sig: 'Take 1 capsule by mouth four times daily for 7 days', weight: 4 },
  { generic: 'nitrofurantoin monohydrate/macrocrystals', brand: null, strength: '100 mg', form: 'capsule', route: 'oral', drugClass: 'Urinary anti-infective', schedule: null, unitCost: 0.6, acute: [10, 5], sig: 'Take 1 capsule by mouth twice daily for 5 days', weight: 4 },
  { generic: 'valacyclovir hydrochloride', brand: null, strength: '1 g', form: 'tablet', route: 'oral', drugClass: 'Antiviral', schedule: null, unitCost: 0.7, acute: [21, 7], sig: 'Take 1 tablet by mouth three times daily for 7 days', weight: 2 },
  { generic: 'prednisone', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'Corticosteroid', schedule: null, unitCost: 0.06, acute: [21, 6], sig: 'Take as directed: 6-day taper', weight: 5 },
  { generic: 'fluticasone propionate', brand: null, strength: '50 mcg/actuation (16 g)', form: 'nasal spray', route: 'nasal', drugClass: 'Intranasal corticosteroid', schedule: null, unitCost: 11, acute: [1, 30], sig: 'Use 2 sprays in each nostril once daily', weight: 4 },
  { generic: 'ondansetron', brand: null, strength: '4 mg', form: 'orally disintegrating tablet', route: 'oral', drugClass: 'Antiemetic (5-HT3 antagonist)', schedule: null, unitCost: 0.25, acute: [12, 4], sig: 'Dissolve 1 tablet on the tongue every 8 hours as needed for nausea', weight: 3 },
  { generic: 'ibuprofen', brand: null, strength: '800 mg', form: 'tablet', route: 'oral', drugClass: 'NSAID', schedule: null, unitCost: 0.1, acute: [30, 10], sig: 'Take 1 tablet by mouth every 8 hours as needed for pain with food', weight: 5 },
  { generic: 'cyclobenzaprine hydrochloride', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'Skeletal muscle relaxant', schedule: null, unitCost: 0.08, acute: [30, 10], sig: 'Take 1 tablet by mouth three times daily as needed for muscle spasm', weight: 3 },
  { generic: 'oxycodone hydrochloride', brand: null, strength: '5 mg', form: 'tablet', route: 'oral', drugClass: 'Opioid analgesic', schedule: 'CII', unitCost: 0.35, acute: [20, 5], sig: 'Take 1 tablet by mouth every 6 hours as needed for severe pain', weight: 2 },
  { generic: 'hydrocodone bitartrate and acetaminophen', brand: null, strength: '5 mg/325 mg', form: 'tablet', route: 'oral', drugClass: 'Opioid analgesic', schedule: 'CII', unitCost: 0.3, acute: [12, 3], sig: 'Take 1 tablet by mouth every 6 hours as needed for pain', weight: 2 },
  { generic: 'tramadol hydrochloride', brand: null, strength: '50 mg', form: 'tablet', route: 'oral', drugClass: 'Opioid analgesic', schedule: 'CIV', unitCost: 0.12, acute: [20, 5], sig: 'Take 1 tablet by mouth every 6 hours as needed for pain', weight: 2 },
  { generic: 'alprazolam', brand: null, strength: '0.5 mg', form: 'tablet', route: 'oral', drugClass: 'Benzodiazepine', schedule: 'CIV', unitCost: 0.07, acute: [30, 30], sig: 'Take 1 tablet by mouth daily as needed for anxiety', weight: 2 },
  { generic: 'zolpidem tartrate', brand: null, strength: '10 mg', form: 'tablet', route: 'oral', drugClass: 'Sedative-hypnotic', schedule: 'CIV', unitCost: 0.1, acute: [30, 30], sig: 'Take 1 tablet by mouth at bedtime as needed for sleep', weight: 2 },
];

const SPECIALTIES: readonly (readonly [string, number])[] = [
  ['Family Medicine', 30], ['Internal Medicine', 25], ['Pediatrics', 6], ['Cardiology', 6], ['Endocrinology', 5],
  ['Psychiatry', 6], ['Emergency Medicine', 6], ['Orthopedic Surgery', 4], ['Obstetrics and Gynecology', 5],
  ['Rheumatology', 2], ['Urgent Care (NP)', 5],
];

const PLANS: readonly (readonly [string, number])[] = [
  ['Blue Harbor Rx (commercial)', 30], ['Keystone Care Rx (commercial)', 20], ['Summit Part D', 18],
  ['State Medicaid Pharmacy Benefit', 16], ['Meridian Rx EPO', 10], ['Cash / discount card', 6],
];

const REJECT_CODES = [
  '75: Prior Authorization Required',
  '79: Refill Too Soon',
  '70: Product/Service Not Covered - Plan/Benefit Exclusion',
  '76: Plan Limitations Exceeded',
  'MR: Product Not On Formulary',
] as const;

const TABLES: readonly TableDef[] = [
  {
    name: 'medications',
    description: 'Drug products stocked by the chain (a FHIR Medication catalogue with synthetic NDC-format codes).',
    primaryKey: 'medication_id',
    columns: [
      col('medication_id', 'text', 'Medication id, e.g. med-0012.'),
      col('ndc', 'text', 'National Drug Code in 5-4-2 format (synthetic).'),
      col('generic_name', 'text', 'Generic (non-proprietary) name.'),
      col('brand_name', 'text', 'Brand name when dispensed as brand; null for generics.', true),
      col('strength', 'text', 'Strength per dispensing unit.'),
      col('dosage_form', 'text', 'Dosage form, e.g. tablet, capsule, pen injector.'),
      col('route', 'text', 'Route of administration.'),
      col('drug_class', 'text', 'Therapeutic / pharmacologic class.'),
      col('dea_schedule', 'text', 'DEA controlled-substance schedule (CII..CV); null when not controlled.', true),
      col('is_specialty', 'boolean', 'Whether the drug is a specialty medication (limited distribution, high cost).'),
      col('unit_cost', 'numeric', 'Acquisition cost per dispensing unit, USD.'),
    ],
  },
  {
    name: 'pharmacies',
    description: 'Pharmacy locations of the chain, including mail-order and specialty fulfilment sites.',
    primaryKey: 'pharmacy_id',
    columns: [
      col('pharmacy_id', 'text', 'Pharmacy id, e.g. phm-007.'),
      col('name', 'text', 'Store / site name.'),
      col('npi', 'text', 'Organizational National Provider Identifier.'),
      col('ncpdp_id', 'text', 'NCPDP provider id (7 digits).'),
      col('pharmacy_type', 'text', 'retail | mail_order | specialty.'),
      col('city', 'text', 'City.'),
      col('state', 'text', 'US state (2-letter code).'),
      col('open_24_hours', 'boolean', 'Whether the pharmacy is open around the clock.'),
    ],
  },
  {
    name: 'patients',
    description: 'Pharmacy patients with their prescription benefit plan. No event time, so period scopes do not restrict it.',
    primaryKey: 'patient_id',
    columns: [
      col('patient_id', 'text', 'Patient id, e.g. rxp-000123.'),
      col('given_name', 'text', 'Given name.'),
      col('family_name', 'text', 'Family name.'),
      col('gender', 'text', 'FHIR administrative-gender: male | female | other | unknown.'),
      col('birth_date', 'date', 'Date of birth.'),
      col('postal_code', 'text', 'ZIP code.'),
      col('plan_name', 'text', 'Prescription benefit plan (or cash).'),
      col('bin', 'text', 'BIN (bank identification number) routing the plan\'s pharmacy claims; null for cash.', true),
      col('member_id', 'text', 'Cardholder id on the plan; null for cash.', true),
    ],
  },
  {
    name: 'prescriptions',
    description: 'Prescriptions received (FHIR MedicationRequest): what was prescribed, by whom, quantity and refills.',
    primaryKey: 'prescription_id',
    timeColumn: 'written_at',
    columns: [
      col('prescription_id', 'text', 'Prescription id, e.g. rx-000123; numbered in order of written_at.'),
      col('rx_number', 'text', 'Pharmacy prescription number printed on the label.'),
      col('patient_id', 'text', 'The patient (patients.patient_id).'),
      col('medication_id', 'text', 'The medication (medications.medication_id).'),
      col('prescriber_name', 'text', 'Prescriber name and credential.'),
      col('prescriber_npi', 'text', 'Prescriber National Provider Identifier.'),
      col('prescriber_specialty', 'text', 'Prescriber specialty.'),
      col('written_at', 'timestamptz', 'When the prescription was written / received.'),
      col('quantity', 'numeric', 'Quantity per fill in dispensing units.'),
      col('days_supply', 'integer', 'Days supply per fill.'),
      col('refills_authorized', 'integer', 'Refills authorized after the original fill.'),
      col('sig', 'text', 'Directions for use.'),
      col('electronic', 'boolean', 'Whether the prescription arrived as an e-prescription (EPCS for controlled substances).'),
      col('status', 'text', 'FHIR MedicationRequest status: active | completed | stopped | cancelled | on-hold.'),
    ],
  },
  {
    name: 'dispenses',
    description: 'Fills (FHIR MedicationDispense) with the pharmacy claim pricing; declined fills carry the NCPDP reject code.',
    primaryKey: 'dispense_id',
    timeColumn: 'dispensed_at',
    columns: [
      col('dispense_id', 'text', 'Dispense id, e.g. dsp-0001234; numbered in order of dispensed_at.'),
      col('prescription_id', 'text', 'The prescription filled (prescriptions.prescription_id).'),
      col('pharmacy_id', 'text', 'Dispensing pharmacy (pharmacies.pharmacy_id).'),
      col('fill_number', 'integer', '0 for the original fill, 1.. for refills.'),
      col('dispensed_at', 'timestamptz', 'When the fill was completed (or declined).'),
      col('status', 'text', 'FHIR MedicationDispense status: completed | declined | cancelled.'),
      col('quantity', 'numeric', 'Quantity dispensed.'),
      col('days_supply', 'integer', 'Days supply dispensed.'),
      col('ingredient_cost', 'numeric', 'Ingredient cost submitted, USD.'),
      col('dispensing_fee', 'numeric', 'Dispensing fee, USD.'),
      col('patient_pay_amount', 'numeric', 'Copay / coinsurance / cash price paid by the patient, USD.'),
      col('plan_paid_amount', 'numeric', 'Amount paid by the plan, USD (0 for cash and declined fills).'),
      col('reject_code', 'text', 'NCPDP reject code for declined claims.', true),
    ],
  },
];

interface Prescriber {
  name: string;
  npi: string;
  specialty: string;
}

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);

  // --- medications ------------------------------------------------------------------------
  const medRows: Cell[][] = [];
  const usedNdc = new Set<string>();
  const labelers = ['00093', '00378', '68180', '65862', '00781', '16729', '31722', '60505', '00002', '00169', '00074', '00003'];
  DRUGS.forEach((d, i) => {
    let ndc: string;
    do ndc = `${rng.pick(labelers)}-${rng.digits(4)}-${rng.pick(['01', '05', '10', '30', '90'])}`;
    while (usedNdc.has(ndc));
    usedNdc.add(ndc);
    medRows.push([textId('med', i + 1, 4), ndc, d.generic, d.brand, d.strength, d.form, d.route, d.drugClass, d.schedule, d.specialty === true, d.unitCost]);
  });

  // --- pharmacies ---------------------------------------------------------------------------
  const pharmacyRows: Cell[][] = [];
  const retailIds: string[] = [];
  const pharmacyTypes: string[] = [];
  for (let i = 1; i <= 22; i++) {
    const type = i === 21 ? 'mail_order' : i === 22 ? 'specialty' : 'retail';
    const place = rng.usPlace();
    const id = textId('phm', i, 3);
    const name = type === 'mail_order' ? 'CarePoint Mail Pharmacy' : type === 'specialty' ? 'CarePoint Specialty Pharmacy' : `CarePoint Pharmacy #${pad(1000 + i * 13, 4)} - ${place.city}`;
    pharmacyRows.push([id, name, npi(rng), rng.digits(7), type, place.city, place.state, type === 'retail' && rng.chance(0.2)]);
    if (type === 'retail') retailIds.push(id);
    pharmacyTypes.push(type);
  }

  // --- prescribers (internal) ---------------------------------------------------------------
  const prescribers: Prescriber[] = [];
  for (const [specialty, weight] of SPECIALTIES) {
    for (let i = 0; i < Math.max(2, Math.round(weight * 0.6)); i++) {
      const cred = specialty.endsWith('(NP)') ? 'NP' : rng.chance(0.1) ? 'DO' : 'MD';
      prescribers.push({ name: `${rng.fullName()}, ${cred}`, npi: npi(rng), specialty: specialty.replace(' (NP)', '') });
    }
  }
  const bySpecialty = new Map<string, Prescriber[]>();
  for (const pr of prescribers) bySpecialty.set(pr.specialty, [...(bySpecialty.get(pr.specialty) ?? []), pr]);
  /** A prescriber whose specialty fits the drug and the patient's age. */
  const prescriberFor = (p: { age: number }, d: Drug): Prescriber => {
    const c = d.drugClass;
    const kid = p.age < 18;
    const options: readonly (readonly [string, number])[] =
      d.specialty ? [['Rheumatology', 8], ['Internal Medicine', 2]]
      : c === 'Combined oral contraceptive' ? [['Obstetrics and Gynecology', 6], ['Family Medicine', 4]]
      : c.includes('insulin') || c.includes('GLP-1') || c.includes('SGLT2') || c === 'Biguanide' ? [['Endocrinology', 4], ['Internal Medicine', 3], ['Family Medicine', 3]]
      : c.includes('antidepressant') || c.includes('serotonin') || c.includes('Serotonin') || c === 'CNS stimulant' || c === 'Benzodiazepine' || c === 'Partial opioid agonist' ? [['Psychiatry', 5], ['Family Medicine', 3], kid ? ['Pediatrics', 4] : ['Internal Medicine', 2]]
      : c.includes('statin') || c.includes('blocker') || c.includes('anticoagulant') || c.includes('platelet') || c.includes('ACE') || c.includes('diuretic') ? [['Cardiology', 3], ['Internal Medicine', 4], ['Family Medicine', 4]]
      : c === 'Opioid analgesic' || c === 'Skeletal muscle relaxant' || c === 'NSAID' ? [['Orthopedic Surgery', 4], ['Emergency Medicine', 3], ['Family Medicine', 2], ['Urgent Care', 2]]
      : d.acute ? (kid ? [['Pediatrics', 6], ['Urgent Care', 2], ['Emergency Medicine', 1]] : [['Family Medicine', 4], ['Urgent Care', 3], ['Internal Medicine', 2], ['Emergency Medicine', 1]])
      : kid ? [['Pediatrics', 1]]
      : [['Family Medicine', 5], ['Internal Medicine', 5]];
    const list = bySpecialty.get(rng.weighted(options));
    return list && list.length > 0 ? rng.pick(list) : rng.pick(bySpecialty.get('Family Medicine') ?? prescribers);
  };

  // --- patients -----------------------------------------------------------------------------
  interface Pt {
    id: string;
    age: number;
    sex: 'male' | 'female';
    cash: boolean;
    medicaid: boolean;
    homePharmacy: string;
    mail: boolean;
  }
  const patients: Pt[] = [];
  const patientRows: Cell[][] = [];
  for (let i = 1; i <= N_PATIENTS; i++) {
    const gender = rng.weighted<string>([['female', 54], ['male', 45], ['other', 0.6], ['unknown', 0.4]]);
    const sex: 'male' | 'female' = gender === 'male' || gender === 'female' ? gender : rng.chance(0.5) ? 'male' : 'female';
    const age = rng.weighted<number>([[rng.int(2, 17), 10], [rng.int(18, 44), 30], [rng.int(45, 64), 35], [rng.int(65, 92), 25]]);
    const birth = Date.UTC(2024, 0, 1) - Math.floor((age + rng.next()) * 365.25 * DAY);
    let plan = rng.weighted(PLANS);
    if (age >= 65 && plan !== 'Cash / discount card') plan = rng.chance(0.85) ? 'Summit Part D' : plan;
    if (age < 65 && plan === 'Summit Part D') plan = 'Blue Harbor Rx (commercial)';
    const cash = plan === 'Cash / discount card';
    const place = rng.usPlace();
    const id = textId('rxp', i);
    const mail = !cash && rng.chance(0.12);
    patients.push({ id, age, sex, cash, medicaid: plan.startsWith('State Medicaid'), homePharmacy: rng.pick(retailIds), mail });
    patientRows.push([
      id, rng.firstName(sex), rng.lastName(), gender, isoDate(birth), place.zip, plan,
      cash ? null : rng.pick(['610014', '004336', '610502', '003858', '015581']),
      cash ? null : `${rng.alnum(3)}${rng.digits(9)}`,
    ]);
  }

  // --- prescriptions and fills ----------------------------------------------------------------
  interface RxDraft {
    written: number;
    seq: number;
    patient: Pt;
    drugIndex: number;
    prescriber: Prescriber;
    quantity: number;
    days: number;
    refills: number;
    electronic: boolean;
    status: string;
    fills: FillDraft[];
    id: string;
  }
  interface FillDraft {
    at: number;
    seq: number;
    rx: RxDraft;
    fillNumber: number;
    pharmacy: string;
    status: 'completed' | 'declined' | 'cancelled';
    reject: string | null;
  }
  const rxs: RxDraft[] = [];
  let seq = 0;
  const chronicIdx = DRUGS.map((d, i) => [i, d] as const).filter(([, d]) => d.chronic !== undefined || d.pack !== undefined);
  const acuteIdx = DRUGS.map((d, i) => [i, d] as const).filter(([, d]) => d.acute !== undefined);
  const fits = (p: Pt, d: Drug): boolean => {
    if (d.drugClass === 'Combined oral contraceptive') return p.sex === 'female' && p.age >= 15 && p.age <= 48;
    if (d.drugClass === 'Alpha-1 blocker') return p.sex === 'male' && p.age >= 45;
    if (d.drugClass === 'CNS stimulant') return p.age >= 6 && p.age <= 45;
    if (d.schedule !== null || d.drugClass.includes('statin') || d.drugClass.includes('blocker') || d.drugClass.includes('anticoagulant')) return p.age >= 18;
    return p.age >= 12 || d.acute !== undefined;
  };
  const pharmacyFor = (p: Pt, d: Drug): string => {
    if (d.specialty) return 'phm-022';
    if (p.mail && d.acute === undefined) return 'phm-021';
    return rng.chance(0.85) ? p.homePharmacy : rng.pick(retailIds);
  };

  const newFill = (rx: RxDraft, t: number, fillNumber: number): FillDraft => {
    const d = at(DRUGS, rx.drugIndex);
    let status: FillDraft['status'] = 'completed';
    let reject: string | null = null;
    if (!rx.patient.cash && rng.chance(fillNumber === 0 ? 0.05 : 0.015)) {
      status = 'declined';
      reject = d.brand !== null && fillNumber === 0 && rng.chance(0.6) ? REJECT_CODES[0] : fillNumber > 0 ? rng.pick([REJECT_CODES[1], REJECT_CODES[3]]) : rng.pick(REJECT_CODES);
    } else if (rng.chance(0.012)) status = 'cancelled';
    return { at: t, seq: seq++, rx, fillNumber, pharmacy: pharmacyFor(rx.patient, d), status, reject };
  };

  const fillTime = (dayMs: number, pharmacyIsMail: boolean): number =>
    pharmacyIsMail ? Math.floor(dayMs / DAY) * DAY + rng.int(10, 20) * HOUR + rng.int(0, 59) * MINUTE : rng.businessTimeOnDay(dayMs);

  // Chronic therapy episodes: a yearly prescription renewed until the therapy stops.
  for (const p of patients) {
    const nChronic = p.age < 18 ? rng.weighted<number>([[0, 70], [1, 30]]) : rng.weighted<number>([[0, 30], [1, 35], [2, 22], [3, 10], [4, 3]]);
    const drugs = new Set<number>();
    for (let k = 0; k < nChronic; k++) {
      for (let tries = 0; tries < 10; tries++) {
        const [i, d] = rng.weighted(chronicIdx.map((x) => [x, x[1].weight] as const));
        if (!drugs.has(i) && fits(p, d)) {
          drugs.add(i);
          break;
        }
      }
    }
    for (const i of drugs) {
      const d = at(DRUGS, i);
      // Therapy may have started before the data span; the first Rx we see is within it.
      let t = rng.chance(0.45) ? SPAN_START_MS + rng.int(0, 60) * DAY : rng.trendingTimeMs(SPAN_START_MS, SPAN_END_MS - 30 * DAY, 0.4);
      const stopAt = rng.chance(0.3) ? t + rng.int(60, 700) * DAY : Infinity;
      const prescriber = prescriberFor(p, d);
      while (t < SPAN_END_MS - 2 * DAY) {
        const ninety = !d.pack && d.schedule === null && (p.mail || rng.chance(0.35));
        const days = d.pack ? d.pack[1] : ninety ? 90 : 30;
        const quantity = d.pack ? d.pack[0] : (d.chronic ?? 1) * days;
        const refills = d.schedule === 'CII' ? 0 : d.schedule !== null ? 5 : Math.max(1, Math.round(365 / days) - 1);
        const written = rng.businessTimeOnDay(t);
        if (written >= SPAN_END_MS) break;
        const rx: RxDraft = {
          written, seq: seq++, patient: p, drugIndex: i, prescriber, quantity, days, refills, electronic: d.schedule !== null || rng.chance(0.88), status: 'active', fills: [], id: '',
        };
        rxs.push(rx);
        // Fills on a days-supply cadence with adherence gaps.
        let fillDay = written + rng.int(0, 2) * DAY;
        let stopped = false;
        for (let n = 0; n <= refills; n++) {
          if (fillDay >= stopAt) {
            stopped = true;
            break;
          }
          const ft = Math.max(written, fillTime(fillDay, rx.patient.mail));
          if (ft >= SPAN_END_MS) break;
          const f = newFill(rx, ft, n);
          rx.fills.push(f);
          if (f.status === 'declined' && f.reject === REJECT_CODES[0]) {
            // Prior authorization obtained a few days later, then filled.
            const ft2 = ft + rng.int(2, 7) * DAY;
            if (ft2 < SPAN_END_MS) rx.fills.push({ ...newFill(rx, ft2, n), status: 'completed', reject: null });
          }
          fillDay = ft + Math.round(days * rng.normal(1.05, 0.12, 0.85, 1.8)) * DAY;
        }
        const filledAll = rx.fills.filter((f) => f.status === 'completed').length >= refills + 1;
        if (stopped) {
          rx.status = rx.fills.length === 0 ? 'cancelled' : 'stopped';
          break;
        }
        rx.status = filledAll ? 'completed' : 'active';
        if (!filledAll) break; // reached the end of the data span
        t = fillDay - rng.int(0, 10) * DAY;
        if (t <= written) t = written + days * DAY;
      }
    }
  }

  // Acute prescriptions: one fill, no refills (antibiotics, short analgesic courses, ...).
  for (let k = 0; k < N_ACUTE_RX; k++) {
    const p = at(patients, rng.int(0, patients.length - 1));
    let drugIndex = -1;
    for (let tries = 0; tries < 10 && drugIndex < 0; tries++) {
      const [i, d] = rng.weighted(acuteIdx.map((x) => [x, x[1].weight] as const));
      if (fits(p, d)) drugIndex = i;
    }
    if (drugIndex < 0) continue;
    const d = at(DRUGS, drugIndex);
    const [qty, days] = d.acute ?? [1, 1];
    // Respiratory infections peak in winter.
    let written = rng.businessTimeMs(SPAN_START_MS, SPAN_END_MS - DAY, 0.3, 0.4);
    if (d.drugClass.includes('antibiotic') && rng.chance(0.35)) {
      const month = new Date(written).getUTCMonth();
      if (month >= 4 && month <= 8) written = rng.businessTimeMs(SPAN_START_MS, SPAN_END_MS - DAY, 0.3, 0.4);
    }
    const refills = d.schedule === 'CII' ? 0 : d.drugClass.includes('Short-acting') || d.form === 'nasal spray' ? rng.int(0, 2) : 0;
    const rx: RxDraft = {
      written, seq: seq++, patient: p, drugIndex, prescriber: prescriberFor(p, d), quantity: qty, days, refills,
      electronic: d.schedule !== null || rng.chance(0.85), status: 'completed', fills: [], id: '',
    };
    rxs.push(rx);
    if (rng.chance(0.06)) {
      rx.status = 'cancelled'; // never picked up / called off
      continue;
    }
    let t = written + rng.int(15, 240) * MINUTE;
    for (let n = 0; n <= refills; n++) {
      if (t >= SPAN_END_MS) break;
      if (n > 0 && rng.chance(0.5)) break;
      rx.fills.push(newFill(rx, t, n));
      t += Math.round(days * rng.float(1.2, 3)) * DAY;
    }
    if (rx.fills.length === 0) rx.status = 'cancelled';
    else if (rx.fills.length < refills + 1 && refills > 0) rx.status = 'active';
    if (rx.status === 'completed' && rng.chance(0.01)) rx.status = 'on-hold';
  }

  rxs.sort((a, b) => a.written - b.written || a.seq - b.seq);
  const rxRows: Cell[][] = rxs.map((rx, i) => {
    rx.id = textId('rx', i + 1);
    return [
      rx.id, String(6_100_000 + i * 3 + rng.int(0, 2)), rx.patient.id, textId('med', rx.drugIndex + 1, 4), rx.prescriber.name,
      rx.prescriber.npi, rx.prescriber.specialty, iso(rx.written), rx.quantity, rx.days, rx.refills, at(DRUGS, rx.drugIndex).sig,
      rx.electronic, rx.status,
    ];
  });

  const fills = rxs.flatMap((r) => r.fills);
  fills.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const fillRows: Cell[][] = fills.map((f, i) => {
    const d = at(DRUGS, f.rx.drugIndex);
    const ingredient = round2(d.unitCost * f.rx.quantity * rng.float(0.97, 1.06) + (d.unitCost < 1 ? rng.float(1, 4) : 0));
    const fee = round2(f.rx.patient.cash ? rng.float(2, 6) : rng.float(0.5, 11.5));
    let patientPay: number;
    let planPaid: number;
    if (f.status !== 'completed') {
      patientPay = 0;
      planPaid = 0;
    } else if (f.rx.patient.cash) {
      patientPay = round2(ingredient + fee);
      planPaid = 0;
    } else {
      const copay =
        f.rx.patient.medicaid ? rng.pick([0, 1, 3, 4])
        : d.specialty ? Math.min(250, (ingredient + fee) * 0.2)
        : d.brand !== null ? rng.pick([35, 45, 60]) * (f.rx.days === 90 ? 2 : 1)
        : rng.pick([0, 5, 10, 15]) * (f.rx.days === 90 ? 2 : 1);
      patientPay = round2(Math.min(copay, ingredient + fee));
      planPaid = round2(ingredient + fee - patientPay);
    }
    return [
      textId('dsp', i + 1, 7), f.rx.id, f.pharmacy, f.fillNumber, iso(f.at), f.status, f.rx.quantity, f.rx.days,
      ingredient, fee, patientPay, planPaid, f.reject,
    ];
  });

  return new Map<string, Cell[][]>([
    ['medications', medRows],
    ['pharmacies', pharmacyRows],
    ['patients', patientRows],
    ['prescriptions', rxRows],
    ['dispenses', fillRows],
  ]);
}

export const pharmacy: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'healthcare',
  name: 'Pharmacy (prescriptions and fills)',
  description:
    'A synthetic pharmacy chain, 2023-2025: medication catalogue, stores, patients with their prescription plans, prescriptions (FHIR MedicationRequest) and fills (FHIR MedicationDispense) priced like NCPDP claims, with refill cadence, adherence gaps, controlled-substance rules and rejects.',
  schema: 'demo_pharmacy',
  tables: TABLES,
  generate,
};
