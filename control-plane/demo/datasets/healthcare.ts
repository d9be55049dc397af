/**
 * demo-healthcare: a regional health system's patient, encounter, claims, prior authorization,
 * eligibility and ADT (HL7 v2) feed, shaped after FHIR R4 (Patient, Encounter, Claim/ClaimResponse,
 * prior-auth Claim, CoverageEligibilityRequest/Response) and HL7 v2 ADT messages.
 *
 * The extract is taken on 2025-12-22 (AS_OF): encounters after it are `planned`, encounters
 * spanning it are `in-progress`, and nothing is billed, decided or messaged after it.
 */

import type { Cell, DatasetDef, TableDef } from '../types.js';
import {
  DAY, HOUR, MINUTE, Rng, SPAN_END_MS, SPAN_START_MS, WeightedIndex, at, col, iso, isoDate, npi,
  pad, round2, textId,
} from '../rng.js';

const TARGET_ID = 'demo-healthcare';
/** The moment the extract was taken. */
const AS_OF = Date.UTC(2025, 11, 22);

const N_PATIENTS = 2000;
const N_ENCOUNTERS = 6000;

// ---------------------------------------------------------------------------------------------
// Reference data
// ---------------------------------------------------------------------------------------------

type Sex = 'male' | 'female';
type EncClass = 'AMB' | 'EMER' | 'IMP' | 'OBSENC' | 'HH' | 'VR';

const CLASS_DISPLAY: Record<EncClass, string> = {
  AMB: 'ambulatory',
  EMER: 'emergency',
  IMP: 'inpatient encounter',
  OBSENC: 'observation encounter',
  HH: 'home health',
  VR: 'virtual',
};

interface Dx {
  readonly code: string;
  readonly display: string;
  readonly sex?: Sex;
  readonly minAge?: number;
  readonly maxAge?: number;
}

const DX_LIST: readonly Dx[] = [
  { code: 'I10', display: 'Essential (primary) hypertension', minAge: 25 },
  { code: 'E11.9', display: 'Type 2 diabetes mellitus without complications', minAge: 18 },
  { code: 'E78.5', display: 'Hyperlipidemia, unspecified', minAge: 25 },
  { code: 'E66.9', display: 'Obesity, unspecified', minAge: 12 },
  { code: 'J06.9', display: 'Acute upper respiratory infection, unspecified' },
  { code: 'J18.9', display: 'Pneumonia, unspecified organism' },
  { code: 'J44.1', display: 'Chronic obstructive pulmonary disease with (acute) exacerbation', minAge: 40 },
  { code: 'J45.909', display: 'Unspecified asthma, uncomplicated' },
  { code: 'U07.1', display: 'COVID-19' },
  { code: 'I50.9', display: 'Heart failure, unspecified', minAge: 40 },
  { code: 'I21.4', display: 'Non-ST elevation (NSTEMI) myocardial infarction', minAge: 35 },
  { code: 'I48.91', display: 'Unspecified atrial fibrillation', minAge: 40 },
  { code: 'I25.10', display: 'Atherosclerotic heart disease of native coronary artery without angina pectoris', minAge: 40 },
  { code: 'I63.9', display: 'Cerebral infarction, unspecified', minAge: 40 },
  { code: 'N39.0', display: 'Urinary tract infection, site not specified' },
  { code: 'N18.30', display: 'Chronic kidney disease, stage 3 unspecified', minAge: 40 },
  { code: 'A41.9', display: 'Sepsis, unspecified organism' },
  { code: 'M54.50', display: 'Low back pain, unspecified', minAge: 16 },
  { code: 'M54.16', display: 'Radiculopathy, lumbar region', minAge: 25 },
  { code: 'M48.062', display: 'Spinal stenosis, lumbar region with neurogenic claudication', minAge: 45 },
  { code: 'M17.11', display: 'Unilateral primary osteoarthritis, right knee', minAge: 45 },
  { code: 'M17.12', display: 'Unilateral primary osteoarthritis, left knee', minAge: 45 },
  { code: 'M16.11', display: 'Unilateral primary osteoarthritis, right hip', minAge: 45 },
  { code: 'M25.561', display: 'Pain in right knee' },
  { code: 'S83.241A', display: 'Other tear of medial meniscus, current injury, right knee, initial encounter', minAge: 14 },
  { code: 'S52.501A', display: 'Unspecified fracture of the lower end of right radius, initial encounter for closed fracture' },
  { code: 'R07.9', display: 'Chest pain, unspecified', minAge: 18 },
  { code: 'R10.9', display: 'Unspecified abdominal pain' },
  { code: 'R51.9', display: 'Headache, unspecified' },
  { code: 'K35.80', display: 'Unspecified acute appendicitis' },
  { code: 'K80.20', display: 'Calculus of gallbladder without cholecystitis without obstruction', minAge: 18 },
  { code: 'K21.9', display: 'Gastro-esophageal reflux disease without esophagitis' },
  { code: 'K50.90', display: "Crohn's disease, unspecified, without complications", minAge: 12 },
  { code: 'F32.9', display: 'Major depressive disorder, single episode, unspecified', minAge: 12 },
  { code: 'F41.1', display: 'Generalized anxiety disorder', minAge: 12 },
  { code: 'G43.909', display: 'Migraine, unspecified, not intractable, without status migrainosus', minAge: 8 },
  { code: 'G47.33', display: 'Obstructive sleep apnea (adult) (pediatric)', minAge: 18 },
  { code: 'G35', display: 'Multiple sclerosis', minAge: 18 },
  { code: 'L03.115', display: 'Cellulitis of right lower limb' },
  { code: 'C50.911', display: 'Malignant neoplasm of unspecified site of right female breast', sex: 'female', minAge: 30 },
  { code: 'C34.90', display: 'Malignant neoplasm of unspecified part of unspecified bronchus or lung', minAge: 40 },
  { code: 'H35.3210', display: 'Exudative age-related macular degeneration, right eye, stage unspecified', minAge: 55 },
  { code: 'Z00.00', display: 'Encounter for general adult medical examination without abnormal findings', minAge: 18 },
  { code: 'Z00.129', display: 'Encounter for routine child health examination without abnormal findings', maxAge: 17 },
  { code: 'Z12.11', display: 'Encounter for screening for malignant neoplasm of colon', minAge: 45 },
  { code: 'Z34.90', display: 'Encounter for supervision of normal pregnancy, unspecified, unspecified trimester', sex: 'female', minAge: 18, maxAge: 45 },
  { code: 'O80', display: 'Encounter for full-term uncomplicated delivery', sex: 'female', minAge: 18, maxAge: 45 },
  { code: 'O32.1XX0', display: 'Maternal care for breech presentation, not applicable or unspecified', sex: 'female', minAge: 18, maxAge: 45 },
  { code: 'Z47.1', display: 'Aftercare following joint replacement surgery', minAge: 45 },
  { code: 'Z74.01', display: 'Bed confinement status', minAge: 50 },
];

const DX = new Map(DX_LIST.map((d) => [d.code, d] as const));
function dx(code: string): Dx {
  const d = DX.get(code);
  if (!d) throw new Error(`unknown ICD-10-CM code ${code}`);
  return d;
}

/** Reason-for-visit mix per encounter class (ICD-10-CM code, weight). */
const REASONS: Record<EncClass, readonly (readonly [string, number])[]> = {
  AMB: [
    ['I10', 12], ['E11.9', 10], ['E78.5', 6], ['Z00.00', 10], ['Z00.129', 6], ['J06.9', 8],
    ['J45.909', 3], ['M54.50', 5], ['F32.9', 4], ['F41.1', 4], ['K21.9', 3], ['G43.909', 2],
    ['Z34.90', 4], ['N18.30', 2], ['E66.9', 3], ['I48.91', 2], ['I25.10', 2], ['M25.561', 2],
    ['N39.0', 2], ['C50.911', 1],
  ],
  EMER: [
    ['R07.9', 12], ['R10.9', 12], ['J06.9', 6], ['S52.501A', 6], ['L03.115', 4], ['N39.0', 5],
    ['J18.9', 5], ['R51.9', 5], ['J44.1', 3], ['K35.80', 3], ['U07.1', 3], ['I21.4', 2],
    ['I63.9', 1], ['A41.9', 2], ['J45.909', 3], ['G43.909', 3],
  ],
  IMP: [
    ['J18.9', 10], ['I50.9', 10], ['A41.9', 8], ['J44.1', 7], ['I21.4', 6], ['I63.9', 5],
    ['K35.80', 5], ['O80', 8], ['U07.1', 4], ['N39.0', 3], ['L03.115', 3], ['I48.91', 3],
  ],
  OBSENC: [['R07.9', 20], ['R10.9', 10], ['I48.91', 5], ['J44.1', 4], ['R51.9', 4], ['L03.115', 3]],
  HH: [['I50.9', 4], ['J44.1', 3], ['Z47.1', 4], ['Z74.01', 2]],
  VR: [
    ['F32.9', 10], ['F41.1', 10], ['J06.9', 8], ['I10', 6], ['E11.9', 6], ['U07.1', 3],
    ['G43.909', 2], ['K21.9', 2],
  ],
};

interface Procedure {
  readonly code: string;
  readonly system: 'CPT' | 'HCPCS';
  readonly display: string;
  readonly setting: 'IMP' | 'AMB' | 'HH';
  readonly dx: readonly string[];
  readonly units: readonly [number, number];
  readonly charge: number;
  readonly department: string;
  readonly sex?: Sex;
  readonly minAge?: number;
  readonly maxAge?: number;
}

/** Services that commonly need prior authorization (CPT / HCPCS Level II). */
const PROCEDURES: readonly Procedure[] = [
  { code: '27447', system: 'CPT', display: 'Arthroplasty, knee, condyle and plateau (total knee arthroplasty)', setting: 'IMP', dx: ['M17.11', 'M17.12'], units: [1, 1], charge: 48000, department: 'Orthopedic Surgery', minAge: 45 },
  { code: '27130', system: 'CPT', display: 'Arthroplasty, acetabular and proximal femoral prosthetic replacement (total hip arthroplasty)', setting: 'IMP', dx: ['M16.11'], units: [1, 1], charge: 52000, department: 'Orthopedic Surgery', minAge: 45 },
  { code: '47562', system: 'CPT', display: 'Laparoscopy, surgical; cholecystectomy', setting: 'IMP', dx: ['K80.20'], units: [1, 1], charge: 21000, department: 'General Surgery', minAge: 18 },
  { code: '63030', system: 'CPT', display: 'Laminotomy with decompression of nerve root(s), one interspace, lumbar', setting: 'IMP', dx: ['M48.062', 'M54.16'], units: [1, 1], charge: 39000, department: 'Neurosurgery', minAge: 30 },
  { code: '92928', system: 'CPT', display: 'Percutaneous transcatheter placement of intracoronary stent(s), single major coronary artery', setting: 'IMP', dx: ['I25.10'], units: [1, 1], charge: 36000, department: 'Cardiology', minAge: 40 },
  { code: '59510', system: 'CPT', display: 'Routine obstetric care including antepartum care, cesarean delivery, and postpartum care', setting: 'IMP', dx: ['O32.1XX0'], units: [1, 1], charge: 19000, department: 'Obstetrics', sex: 'female', minAge: 18, maxAge: 45 },
  { code: '70553', system: 'CPT', display: 'MRI brain without contrast, followed by contrast and further sequences', setting: 'AMB', dx: ['G43.909', 'R51.9', 'G35'], units: [1, 1], charge: 3200, department: 'Radiology' },
  { code: '72148', system: 'CPT', display: 'MRI spinal canal and contents, lumbar; without contrast', setting: 'AMB', dx: ['M54.50', 'M54.16', 'M48.062'], units: [1, 1], charge: 2400, department: 'Radiology', minAge: 16 },
  { code: '73721', system: 'CPT', display: 'MRI any joint of lower extremity; without contrast', setting: 'AMB', dx: ['M25.561', 'S83.241A'], units: [1, 1], charge: 2100, department: 'Radiology' },
  { code: '74177', system: 'CPT', display: 'CT abdomen and pelvis; with contrast', setting: 'AMB', dx: ['R10.9', 'K50.90'], units: [1, 1], charge: 2600, department: 'Radiology' },
  { code: '78452', system: 'CPT', display: 'Myocardial perfusion imaging, tomographic (SPECT), multiple studies', setting: 'AMB', dx: ['R07.9', 'I25.10'], units: [1, 1], charge: 3900, department: 'Cardiology', minAge: 30 },
  { code: '93306', system: 'CPT', display: 'Echocardiography, transthoracic, complete, with spectral and color flow Doppler', setting: 'AMB', dx: ['I50.9', 'I48.91'], units: [1, 1], charge: 1800, department: 'Cardiology', minAge: 30 },
  { code: '29881', system: 'CPT', display: 'Arthroscopy, knee, surgical; with meniscectomy (medial or lateral)', setting: 'AMB', dx: ['S83.241A'], units: [1, 1], charge: 9800, department: 'Orthopedic Surgery', minAge: 14 },
  { code: '43239', system: 'CPT', display: 'Esophagogastroduodenoscopy, flexible, transoral; with biopsy, single or multiple', setting: 'AMB', dx: ['K21.9'], units: [1, 1], charge: 3100, department: 'Gastroenterology', minAge: 18 },
  { code: '45378', system: 'CPT', display: 'Colonoscopy, flexible; diagnostic', setting: 'AMB', dx: ['Z12.11'], units: [1, 1], charge: 2900, department: 'Gastroenterology', minAge: 45 },
  { code: '97110', system: 'CPT', display: 'Therapeutic procedure, 1 or more areas, each 15 minutes; therapeutic exercises', setting: 'AMB', dx: ['M54.50', 'M17.11', 'M25.561'], units: [8, 24], charge: 160, department: 'Physical Therapy' },
  { code: '95810', system: 'CPT', display: 'Polysomnography; age 6 years or older, sleep staging with 4 or more additional parameters', setting: 'AMB', dx: ['G47.33'], units: [1, 1], charge: 3400, department: 'Sleep Medicine', minAge: 18 },
  { code: 'J9271', system: 'HCPCS', display: 'Injection, pembrolizumab, 1 mg', setting: 'AMB', dx: ['C34.90'], units: [200, 400], charge: 60, department: 'Oncology', minAge: 40 },
  { code: 'J0178', system: 'HCPCS', display: 'Injection, aflibercept, 1 mg', setting: 'AMB', dx: ['H35.3210'], units: [2, 2], charge: 2100, department: 'Ophthalmology', minAge: 55 },
  { code: 'J1745', system: 'HCPCS', display: 'Injection, infliximab, excludes biosimilar, 10 mg', setting: 'AMB', dx: ['K50.90'], units: [30, 60], charge: 140, department: 'Gastroenterology', minAge: 12 },
  { code: 'E0601', system: 'HCPCS', display: 'Continuous positive airway pressure (CPAP) device', setting: 'AMB', dx: ['G47.33'], units: [1, 1], charge: 1400, department: 'Sleep Medicine', minAge: 18 },
  { code: 'G0151', system: 'HCPCS', display: 'Services performed by a qualified physical therapist in the home health or hospice setting, each 15 minutes', setting: 'HH', dx: ['Z47.1'], units: [12, 36], charge: 95, department: 'Home Health', minAge: 45 },
  { code: 'G0299', system: 'HCPCS', display: 'Direct skilled nursing services of a registered nurse (RN) in the home health or hospice setting, each 15 minutes', setting: 'HH', dx: ['I50.9', 'J44.1'], units: [8, 32], charge: 85, department: 'Home Health', minAge: 40 },
  { code: 'E0260', system: 'HCPCS', display: 'Hospital bed, semi-electric, with any type side rails, with mattress', setting: 'HH', dx: ['Z74.01'], units: [1, 1], charge: 2300, department: 'Home Health', minAge: 50 },
  { code: 'K0823', system: 'HCPCS', display: "Power wheelchair, group 2 standard, captain's chair, patient weight capacity up to and including 300 pounds", setting: 'HH', dx: ['G35'], units: [1, 1], charge: 6800, department: 'Home Health', minAge: 18 },
];

/** Evaluation and management (and similar) service codes billed when no authorized procedure applies. */
const EM_CODES: Record<EncClass, readonly (readonly [string, string, number])[]> = {
  AMB: [
    ['99213', 'Office or other outpatient visit for an established patient, low level of medical decision making', 50],
    ['99214', 'Office or other outpatient visit for an established patient, moderate level of medical decision making', 35],
    ['99203', 'Office or other outpatient visit for a new patient, low level of medical decision making', 15],
  ],
  EMER: [
    ['99283', 'Emergency department visit, moderate level of medical decision making', 35],
    ['99284', 'Emergency department visit, moderately high level of medical decision making', 40],
    ['99285', 'Emergency department visit, high level of medical decision making', 25],
  ],
  IMP: [
    ['99223', 'Initial hospital inpatient or observation care, high level of medical decision making', 70],
    ['99222', 'Initial hospital inpatient or observation care, moderate level of medical decision making', 30],
  ],
  OBSENC: [['99222', 'Initial hospital inpatient or observation care, moderate level of medical decision making', 100]],
  HH: [['G0299', 'Direct skilled nursing services of a registered nurse (RN) in the home health or hospice setting, each 15 minutes', 100]],
  VR: [
    ['99213', 'Office or other outpatient visit for an established patient, low level of medical decision making (telehealth, modifier 95)', 70],
    ['99214', 'Office or other outpatient visit for an established patient, moderate level of medical decision making (telehealth, modifier 95)', 30],
  ],
};

interface Payer {
  readonly id: string;
  readonly name: string;
  readonly kind: 'medicare' | 'medicaid' | 'commercial' | 'selfpay';
}

const PAYERS: readonly Payer[] = [
  { id: 'PAY-MCR', name: 'Medicare Part A/B', kind: 'medicare' },
  { id: 'PAY-MAD', name: 'Summit Medicare Advantage HMO', kind: 'medicare' },
  { id: 'PAY-MCD', name: 'State Medicaid Managed Care', kind: 'medicaid' },
  { id: 'PAY-BHP', name: 'Blue Harbor Health PPO', kind: 'commercial' },
  { id: 'PAY-KCH', name: 'Keystone Care HMO', kind: 'commercial' },
  { id: 'PAY-MEP', name: 'Meridian Commercial EPO', kind: 'commercial' },
  { id: 'PAY-SELF', name: 'Self-pay', kind: 'selfpay' },
];

const FACILITIES: Record<EncClass, readonly string[]> = {
  AMB: ['Riverside Medical Group - Downtown Clinic', 'Riverside Medical Group - Northside Clinic', 'Lakeside Community Health Center'],
  EMER: ['Riverside General Hospital'],
  IMP: ['Riverside General Hospital'],
  OBSENC: ['Riverside General Hospital'],
  HH: ['Riverside Home Health'],
  VR: ['Riverside Virtual Care'],
};

const DEPARTMENTS_BY_CLASS: Record<EncClass, readonly (readonly [string, number])[]> = {
  AMB: [['Family Medicine', 30], ['Internal Medicine', 25], ['Cardiology', 8], ['Endocrinology', 6], ['Behavioral Health', 6], ['Orthopedic Surgery', 5], ['Obstetrics', 6], ['Gastroenterology', 4], ['Oncology', 3]],
  EMER: [['Emergency Medicine', 1]],
  IMP: [['Hospital Medicine', 60], ['Cardiology', 15], ['General Surgery', 10], ['Obstetrics', 10], ['Neurology', 5]],
  OBSENC: [['Hospital Medicine', 1]],
  HH: [['Home Health', 1]],
  VR: [['Telehealth', 1]],
};

/** Inpatient units (HL7 PL point-of-care) by department. */
const UNITS: Record<string, readonly string[]> = {
  'Hospital Medicine': ['MED-4W', 'MED-4E', 'MED-5W'],
  Cardiology: ['CARD-3N', 'CCU-3S'],
  'General Surgery': ['SURG-5E', 'SURG-6E'],
  'Orthopedic Surgery': ['ORTHO-6S'],
  Neurosurgery: ['NEURO-7N'],
  Neurology: ['NEURO-7N'],
  Obstetrics: ['LD-2E', 'MBU-2W'],
};

const DISCHARGE_DISPOSITIONS: readonly (readonly [string, number])[] = [
  ['home', 70], ['home-health', 8], ['snf', 7], ['rehab', 4], ['other-hcf', 3], ['aadvice', 2],
  ['long', 1], ['oth', 1],
];

const PA_DENIAL_REASONS = [
  'Not medically necessary based on submitted documentation',
  'Insufficient clinical documentation',
  'Conservative therapy requirement not met',
  'Out-of-network provider',
  'Service not covered under member plan',
  'Step therapy requirement not met',
] as const;

const CLAIM_ERROR_REASONS = [
  'CO-16: Claim/service lacks information or has submission/billing error(s)',
  'CO-197: Precertification/authorization/notification absent',
  'CO-50: Non-covered service, not deemed a medical necessity by the payer',
  'CO-29: The time limit for filing has expired',
  'CO-22: This care may be covered by another payer per coordination of benefits',
  'CO-4: The procedure code is inconsistent with the modifier used',
] as const;

const CLAIM_PARTIAL_REASONS = [
  'CO-45: Charge exceeds fee schedule/maximum allowable',
  'CO-97: Payment included in the allowance for another service',
  'CO-151: Payment adjusted because the payer deems the information submitted does not support this many services',
] as const;

const AAA_ERRORS = [
  '72: Invalid/Missing Subscriber/Insured ID',
  '75: Subscriber/Insured Not Found',
  '42: Unable to Respond at Current Time',
  '73: Invalid/Missing Subscriber/Insured Name',
  '58: Invalid/Missing Date-of-Birth',
] as const;

const LANGUAGES: readonly (readonly [string, number])[] = [
  ['en', 78], ['es', 13], ['zh', 2], ['vi', 2], ['ar', 1], ['pt', 1], ['ru', 1], ['fr', 1], ['ht', 1],
];

const MARITAL: readonly (readonly [string, number])[] = [['M', 45], ['S', 35], ['D', 10], ['W', 6], ['U', 4]];

// ---------------------------------------------------------------------------------------------
// Table definitions
// ---------------------------------------------------------------------------------------------

const TABLES: readonly TableDef[] = [
  {
    name: 'patients',
    description: 'Patients of the health system (FHIR Patient): demographics, identifiers and primary coverage. No event time, so period scopes do not restrict it.',
    primaryKey: 'patient_id',
    columns: [
      col('patient_id', 'text', 'Patient resource id, e.g. pat-000123.'),
      col('mrn', 'text', 'Medical record number assigned by the health system (identifier type MR).'),
      col('given_name', 'text', 'Given (first) name.'),
      col('family_name', 'text', 'Family (last) name.'),
      col('gender', 'text', 'FHIR administrative-gender: male | female | other | unknown.'),
      col('birth_date', 'date', 'Date of birth.'),
      col('marital_status', 'text', 'HL7 v3 MaritalStatus code: M married, S never married, D divorced, W widowed, U unmarried/unknown.'),
      col('preferred_language', 'text', 'Preferred language (BCP-47 code), e.g. en, es.'),
      col('phone', 'text', 'Home phone number (fictional 555-01xx range).'),
      col('address_line', 'text', 'Street address.'),
      col('city', 'text', 'City.'),
      col('state', 'text', 'US state (2-letter code).'),
      col('postal_code', 'text', 'ZIP code.'),
      col('primary_payer_id', 'text', 'Identifier of the primary payer (PAY-...), PAY-SELF for uninsured patients.'),
      col('primary_payer_name', 'text', 'Name of the primary payer / health plan.'),
      col('member_id', 'text', 'Subscriber/member id on the primary coverage; null for self-pay.', true),
    ],
  },
  {
    name: 'encounters',
    description: 'Encounters (FHIR Encounter): ambulatory, emergency, inpatient, observation, home health and virtual visits.',
    primaryKey: 'encounter_id',
    timeColumn: 'period_start',
    columns: [
      col('encounter_id', 'text', 'Encounter resource id, e.g. enc-000123; numbered in order of period_start.'),
      col('patient_id', 'text', 'The patient (patients.patient_id).'),
      col('status', 'text', 'FHIR encounter status: planned | arrived | triaged | in-progress | finished | cancelled | entered-in-error.'),
      col('class_code', 'text', 'Encounter class from HL7 v3 ActCode: AMB, EMER, IMP, OBSENC, HH, VR.'),
      col('class_display', 'text', 'Display text of the class code.'),
      col('service_type', 'text', 'Clinical department / service providing the encounter.'),
      col('period_start', 'timestamptz', 'Start of the encounter (for planned encounters, the scheduled start).'),
      col('period_end', 'timestamptz', 'End of the encounter; null while planned, in progress or when cancelled.', true),
      col('reason_code', 'text', 'Primary reason / diagnosis, ICD-10-CM code.'),
      col('reason_display', 'text', 'Display text of the ICD-10-CM code.'),
      col('facility', 'text', 'Location (facility) where the encounter took place.'),
      col('practitioner_name', 'text', 'Attending / rendering practitioner.'),
      col('practitioner_npi', 'text', 'National Provider Identifier of the practitioner.'),
      col('discharge_disposition', 'text', 'FHIR discharge-disposition code (home, snf, rehab, ...) for finished emergency, inpatient and observation stays.', true),
      col('length_of_stay_minutes', 'integer', 'Minutes between period_start and period_end; null when period_end is null.', true),
    ],
  },
  {
    name: 'claims',
    description: 'Claims submitted to payers for finished encounters (FHIR Claim with its ClaimResponse outcome and adjudicated amounts, USD).',
    primaryKey: 'claim_id',
    timeColumn: 'created_at',
    columns: [
      col('claim_id', 'text', 'Claim resource id, e.g. clm-000123; numbered in order of created_at.'),
      col('patient_id', 'text', 'The patient (patients.patient_id).'),
      col('encounter_id', 'text', 'The encounter billed (encounters.encounter_id).'),
      col('prior_authorization_id', 'text', 'Approved prior authorization referenced by the claim (prior_authorizations.prior_auth_id), if any.', true),
      col('payer_id', 'text', 'Payer the claim was submitted to.'),
      col('payer_name', 'text', 'Name of the payer.'),
      col('claim_type', 'text', 'FHIR claim-type: institutional (facility) or professional.'),
      col('status', 'text', 'FHIR claim status: active | cancelled | draft | entered-in-error.'),
      col('outcome', 'text', 'ClaimResponse outcome: queued | complete | error | partial.'),
      col('created_at', 'timestamptz', 'When the claim was created / submitted.'),
      col('billable_period_start', 'date', 'First day of the billable period (the encounter start date).'),
      col('billable_period_end', 'date', 'Last day of the billable period (the encounter end date).'),
      col('diagnosis_code', 'text', 'Principal diagnosis, ICD-10-CM code.'),
      col('diagnosis_display', 'text', 'Display text of the principal diagnosis.'),
      col('service_code', 'text', 'Principal service billed, CPT or HCPCS code.'),
      col('service_display', 'text', 'Display text of the service code.'),
      col('total_amount', 'numeric', 'Total billed charges, USD.'),
      col('allowed_amount', 'numeric', 'Amount allowed by the payer after adjudication, USD; null until adjudicated.', true),
      col('paid_amount', 'numeric', 'Amount paid by the payer, USD; null until adjudicated.', true),
      col('patient_responsibility', 'numeric', 'Patient share (deductible, copay, coinsurance), USD; allowed_amount - paid_amount.', true),
      col('adjudicated_at', 'timestamptz', 'When the payer returned its ClaimResponse; null while queued.', true),
      col('adjustment_reason', 'text', 'CARC adjustment reason for error or partial outcomes.', true),
    ],
  },
  {
    name: 'prior_authorizations',
    description: 'Prior authorization requests for services that need payer approval (FHIR Claim with use = preauthorization and its ClaimResponse).',
    primaryKey: 'prior_auth_id',
    timeColumn: 'requested_at',
    columns: [
      col('prior_auth_id', 'text', 'Prior authorization id, e.g. pa-000123; numbered in order of requested_at.'),
      col('patient_id', 'text', 'The patient (patients.patient_id).'),
      col('encounter_id', 'text', 'The encounter the service is planned for (encounters.encounter_id).'),
      col('payer_id', 'text', 'Payer asked for authorization.'),
      col('service_code', 'text', 'Requested service, CPT or HCPCS code.'),
      col('service_code_system', 'text', 'Code system of service_code: CPT or HCPCS.'),
      col('service_display', 'text', 'Display text of the requested service.'),
      col('diagnosis_code', 'text', 'Supporting diagnosis, ICD-10-CM code.'),
      col('urgency', 'text', 'Review priority: routine | urgent.'),
      col('status', 'text', 'Authorization status: approved | denied | pending | cancelled.'),
      col('requested_at', 'timestamptz', 'When the request was submitted.'),
      col('decided_at', 'timestamptz', 'When the payer decided; null while pending or when cancelled.', true),
      col('units_requested', 'integer', 'Units of service requested.'),
      col('units_approved', 'integer', 'Units approved; null unless approved.', true),
      col('authorization_number', 'text', 'Payer authorization (pre-auth reference) number; null unless approved.', true),
      col('denial_reason', 'text', 'Reason given for a denial.', true),
    ],
  },
  {
    name: 'coverage_eligibility',
    description: 'Coverage eligibility checks sent to payers (FHIR CoverageEligibilityRequest with its CoverageEligibilityResponse).',
    primaryKey: 'request_id',
    timeColumn: 'created_at',
    columns: [
      col('request_id', 'text', 'Eligibility request id, e.g. cer-000123; numbered in order of created_at.'),
      col('patient_id', 'text', 'The patient (patients.patient_id).'),
      col('encounter_id', 'text', 'The encounter the check was made for (encounters.encounter_id); null for standalone checks.', true),
      col('payer_id', 'text', 'Payer queried; null for discovery requests that found no coverage.', true),
      col('purpose', 'text', 'Request purpose: benefits | validation | discovery | auth-requirements.'),
      col('status', 'text', 'Request status: active | cancelled | entered-in-error.'),
      col('outcome', 'text', 'Response outcome: queued | complete | error | partial.'),
      col('created_at', 'timestamptz', 'When the request was sent.'),
      col('responded_at', 'timestamptz', 'When the response arrived; null while queued.', true),
      col('coverage_inforce', 'boolean', 'Whether the coverage is in force on the service date; null without a complete/partial response.', true),
      col('plan_name', 'text', 'Plan reported by the payer.', true),
      col('member_id', 'text', 'Member id reported/validated by the payer.', true),
      col('copay_amount', 'numeric', 'Copay for the service category (benefits requests), USD.', true),
      col('deductible_remaining', 'numeric', 'Remaining in-network deductible for the plan year (benefits requests), USD.', true),
      col('auth_required', 'boolean', 'Whether the service needs prior authorization (auth-requirements requests).', true),
      col('error_code', 'text', 'X12 271 AAA reject reason when the outcome is error.', true),
    ],
  },
  {
    name: 'adt_events',
    description: 'HL7 v2 ADT messages from the hospital and clinics: A01 admit, A02 transfer, A03 discharge, A04 register, A08 update patient information.',
    primaryKey: 'event_id',
    timeColumn: 'occurred_at',
    columns: [
      col('event_id', 'text', 'Event id, e.g. adt-0001234; numbered in order of occurred_at.'),
      col('message_control_id', 'text', 'MSH-10 message control id.'),
      col('trigger_event', 'text', 'EVN-1 / MSH-9.2 trigger event: A01 | A02 | A03 | A04 | A08.'),
      col('message_type', 'text', 'MSH-9 message type, e.g. ADT^A01.'),
      col('event_description', 'text', 'Meaning of the trigger event.'),
      col('patient_id', 'text', 'The patient (patients.patient_id).'),
      col('encounter_id', 'text', 'The visit (encounters.encounter_id), PV1-19.'),
      col('occurred_at', 'timestamptz', 'EVN-2 recorded date/time of the event.'),
      col('patient_class', 'text', 'PV1-2 patient class: I inpatient, E emergency, O outpatient.'),
      col('assigned_location', 'text', 'PV1-3 assigned location as unit^room^bed (or clinic name).'),
      col('prior_location', 'text', 'PV1-6 prior location for transfers.', true),
      col('attending_practitioner', 'text', 'PV1-7 attending doctor (NPI^family^given).'),
      col('sending_facility', 'text', 'MSH-4 sending facility.'),
      col('segments', 'jsonb', 'Selected parsed fields of the message (MSH, EVN, PID, PV1) as a JSON object.'),
    ],
  },
];

// ---------------------------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------------------------

interface Patient {
  id: string;
  mrn: string;
  given: string;
  family: string;
  gender: 'male' | 'female' | 'other' | 'unknown';
  sex: Sex;
  birthMs: number;
  payer: Payer;
  memberId: string | null;
}

interface Practitioner {
  name: string;
  given: string;
  family: string;
  npi: string;
  department: string;
}

interface Encounter {
  id: string;
  patient: Patient;
  cls: EncClass;
  department: string;
  start: number;
  end: number; // intended end
  status: string;
  dx: Dx;
  procedure: Procedure | null;
  facility: string;
  practitioner: Practitioner;
  disposition: string | null;
  unit: string | null;
  pa: PriorAuth | null;
}

interface PriorAuth {
  id: string;
  enc: Encounter;
  urgency: 'routine' | 'urgent';
  status: 'approved' | 'denied' | 'pending' | 'cancelled';
  requested: number;
  decided: number | null;
  unitsRequested: number;
  unitsApproved: number | null;
  authNumber: string | null;
  denial: string | null;
}

function ageAt(p: Patient, ms: number): number {
  return (ms - p.birthMs) / (365.25 * DAY);
}

function fits(p: Patient, ms: number, c: { sex?: Sex; minAge?: number; maxAge?: number }): boolean {
  const age = ageAt(p, ms);
  if (c.sex && (p.gender === 'other' || p.gender === 'unknown' || p.sex !== c.sex)) return false;
  if (c.minAge !== undefined && age < c.minAge) return false;
  if (c.maxAge !== undefined && age >= c.maxAge + 1) return false;
  return true;
}

function generate(): Map<string, Cell[][]> {
  const rng = new Rng(TARGET_ID);

  // --- patients ---------------------------------------------------------------------------
  const patients: Patient[] = [];
  const usedMrn = new Set<string>();
  const patientRows: Cell[][] = [];
  for (let i = 1; i <= N_PATIENTS; i++) {
    const gender = rng.weighted<Patient['gender']>([['female', 51], ['male', 48], ['other', 0.6], ['unknown', 0.4]]);
    const sex: Sex = gender === 'male' || gender === 'female' ? gender : rng.chance(0.5) ? 'male' : 'female';
    // Age on 2024-07-01: children, adults and a long tail of older adults.
    const age = rng.weighted<[number, number]>([[[2, 17], 18], [[18, 39], 27], [[40, 64], 32], [[65, 79], 16], [[80, 96], 7]]);
    const birthMs = Date.UTC(2024, 6, 1) - Math.floor(rng.float(age[0], age[1] + 1) * 365.25 * DAY);
    const birth = Math.min(birthMs, Date.UTC(2022, 11, 31));
    const ageNow = (Date.UTC(2024, 6, 1) - birth) / (365.25 * DAY);
    const payer: Payer =
      ageNow >= 65
        ? rng.weighted<Payer>([[at(PAYERS, 0), 55], [at(PAYERS, 1), 40], [at(PAYERS, 2), 5]])
        : rng.weighted<Payer>([
            [at(PAYERS, 2), ageNow < 18 ? 35 : 18], [at(PAYERS, 3), 28], [at(PAYERS, 4), 22],
            [at(PAYERS, 5), 20], [at(PAYERS, 6), 8],
          ]);
    let mrn: string;
    do mrn = `MRN${rng.digits(8)}`;
    while (usedMrn.has(mrn));
    usedMrn.add(mrn);
    const memberId =
      payer.kind === 'selfpay' ? null
      : payer.kind === 'medicare' && payer.id === 'PAY-MCR' ? `${rng.int(1, 9)}${rng.alnum(3)}-${rng.alnum(3)}-${rng.alnum(4)}`
      : `${payer.id.slice(4)}${rng.digits(9)}`;
    const given = rng.firstName(sex);
    const family = rng.lastName();
    const place = rng.usPlace();
    const p: Patient = { id: textId('pat', i), mrn, given, family, gender, sex, birthMs: birth, payer, memberId };
    patients.push(p);
    patientRows.push([
      p.id, mrn, given, family, gender, isoDate(birth),
      ageNow < 18 ? 'S' : rng.weighted(MARITAL), rng.weighted(LANGUAGES), rng.phone(),
      rng.streetAddress(), place.city, place.state, place.zip, payer.id, payer.name, memberId,
    ]);
  }

  // --- practitioners (internal; surfaced by name/NPI on encounters) -------------------------
  const departments = [
    'Family Medicine', 'Internal Medicine', 'Cardiology', 'Endocrinology', 'Behavioral Health',
    'Orthopedic Surgery', 'Obstetrics', 'Gastroenterology', 'Oncology', 'Emergency Medicine',
    'Hospital Medicine', 'General Surgery', 'Neurology', 'Neurosurgery', 'Home Health', 'Telehealth',
    'Radiology', 'Physical Therapy', 'Sleep Medicine', 'Ophthalmology', 'Pediatrics',
  ];
  const practitionersByDept = new Map<string, Practitioner[]>();
  for (const d of departments) {
    const n = d === 'Family Medicine' || d === 'Internal Medicine' || d === 'Emergency Medicine' || d === 'Hospital Medicine' ? 6 : 2;
    const list: Practitioner[] = [];
    for (let i = 0; i < n; i++) {
      const given = rng.firstName();
      const family = rng.lastName();
      const credential = d === 'Physical Therapy' ? 'DPT' : d === 'Home Health' ? 'RN' : 'MD';
      list.push({ name: `${given} ${family}, ${credential}`, given, family, npi: npi(rng), department: d });
    }
    practitionersByDept.set(d, list);
  }
  const practitioner = (d: string): Practitioner => rng.pick(practitionersByDept.get(d) ?? practitionersByDept.get('Internal Medicine') ?? []);

  // --- encounters ---------------------------------------------------------------------------
  const patientWeights = new WeightedIndex(patients.map(() => rng.logNormal(1, 0.9, 0.05, 20)));
  const encounters: Encounter[] = [];
  for (let i = 0; i < N_ENCOUNTERS; i++) {
    const patient = at(patients, patientWeights.pick(rng));
    let cls = rng.weighted<EncClass>([['AMB', 55], ['EMER', 14], ['IMP', 9], ['OBSENC', 5], ['HH', 5], ['VR', 12]]);
    // Unscheduled care happens only up to the extract date; scheduled visits may lie after it.
    const start0 =
      cls === 'EMER' || cls === 'IMP' || cls === 'OBSENC'
        ? rng.trendingTimeMs(SPAN_START_MS, AS_OF, 0.3)
        : rng.businessTimeMs(SPAN_START_MS, SPAN_END_MS - 12 * HOUR, 0.3, 0.1);
    const age = ageAt(patient, start0);
    if (cls === 'HH' && age < 40) cls = 'AMB';

    // Does this encounter deliver a service that needs prior authorization?
    let procedure: Procedure | null = null;
    const paChance = patient.payer.kind === 'selfpay' ? 0 : cls === 'IMP' ? 0.55 : cls === 'AMB' ? 0.27 : cls === 'HH' ? 0.85 : 0;
    if (paChance > 0 && rng.chance(paChance)) {
      const setting = cls === 'IMP' ? 'IMP' : cls === 'HH' ? 'HH' : 'AMB';
      const options = PROCEDURES.filter((pr) => pr.setting === setting && fits(patient, start0, pr));
      if (options.length > 0) procedure = rng.pick(options);
    }

    let diagnosis: Dx;
    let department: string;
    if (procedure) {
      diagnosis = dx(rng.pick(procedure.dx));
      department = procedure.department;
    } else {
      let chosen: Dx | null = null;
      for (let tries = 0; tries < 25 && !chosen; tries++) {
        const d = dx(rng.weighted(REASONS[cls]));
        if (fits(patient, start0, d)) chosen = d;
      }
      diagnosis = chosen ?? dx(age < 18 && cls === 'AMB' ? 'Z00.129' : 'J06.9');
      department = rng.weighted(DEPARTMENTS_BY_CLASS[cls]);
      if (diagnosis.code.startsWith('O') || diagnosis.code === 'Z34.90') department = 'Obstetrics';
      else if (department === 'Obstetrics') department = cls === 'IMP' ? 'Hospital Medicine' : 'Family Medicine';
      if (cls === 'AMB' && age < 18) department = 'Pediatrics';
      if (cls === 'IMP' && (diagnosis.code === 'I21.4' || diagnosis.code === 'I48.91' || diagnosis.code === 'I50.9') && rng.chance(0.6)) department = 'Cardiology';
      if (cls === 'IMP' && diagnosis.code === 'K35.80') department = 'General Surgery';
      if (cls === 'IMP' && diagnosis.code === 'I63.9') department = 'Neurology';
      if (cls === 'AMB' && (diagnosis.code === 'F32.9' || diagnosis.code === 'F41.1') && rng.chance(0.5)) department = 'Behavioral Health';
    }

    let durationMin: number;
    switch (cls) {
      case 'AMB': durationMin = rng.int(15, procedure ? 180 : 60); break;
      case 'VR': durationMin = rng.int(10, 40); break;
      case 'HH': durationMin = rng.int(30, 90); break;
      case 'EMER': durationMin = Math.round(rng.logNormal(240, 0.45, 60, 1200)); break;
      case 'OBSENC': durationMin = Math.round(rng.float(8, 40) * 60); break;
      case 'IMP': durationMin = Math.round(rng.logNormal(3.2, 0.55, 1, 21) * 24 * 60 + rng.int(-300, 300)); break;
    }
    durationMin = Math.max(10, durationMin);
    // Elective procedures start in the morning.
    let start = start0;
    if (procedure && cls === 'IMP') start = Math.floor(start0 / DAY) * DAY + rng.int(6, 9) * HOUR + rng.pick([0, 15, 30, 45]) * MINUTE;
    const end = start + durationMin * MINUTE;

    const unitList = UNITS[department] ?? UNITS['Hospital Medicine'] ?? [];
    const unit =
      cls === 'IMP' ? `${rng.pick(unitList)}^${rng.int(1, 4)}${pad(rng.int(1, 30), 2)}^${rng.pick(['A', 'B'])}`
      : cls === 'OBSENC' ? `OBS-1^${100 + rng.int(1, 24)}^A`
      : cls === 'EMER' ? `ED^BAY${pad(rng.int(1, 32), 2)}^A`
      : null;

    encounters.push({
      id: '', patient, cls, department, start, end, status: 'finished', dx: diagnosis, procedure,
      facility: rng.pick(FACILITIES[cls]), practitioner: practitioner(cls === 'EMER' ? 'Emergency Medicine' : department),
      disposition: null, unit, pa: null,
    });
  }
  encounters.sort((a, b) => a.start - b.start);
  encounters.forEach((e, i) => {
    e.id = textId('enc', i + 1);
  });

  // Status from the extract date.
  for (const e of encounters) {
    if (e.start >= AS_OF) e.status = 'planned';
    else if (e.end > AS_OF || e.end >= SPAN_END_MS) e.status = e.cls === 'EMER' ? rng.pick(['arrived', 'triaged', 'in-progress']) : 'in-progress';
    else if (rng.chance(e.cls === 'AMB' || e.cls === 'VR' || e.cls === 'HH' ? 0.04 : 0.005)) e.status = 'cancelled';
    else if (rng.chance(0.003)) e.status = 'entered-in-error';
    else e.status = 'finished';
    if (e.status === 'finished' && (e.cls === 'EMER' || e.cls === 'IMP' || e.cls === 'OBSENC')) {
      e.disposition = e.cls === 'EMER' ? rng.weighted<string>([['home', 88], ['aadvice', 4], ['other-hcf', 4], ['oth', 4]]) : rng.weighted(DISCHARGE_DISPOSITIONS);
    }
  }

  // --- prior authorizations -------------------------------------------------------------------
  const pas: PriorAuth[] = [];
  for (const e of encounters) {
    if (!e.procedure || e.status === 'entered-in-error') continue;
    const urgency: PriorAuth['urgency'] = rng.chance(e.cls === 'IMP' ? 0.15 : 0.08) ? 'urgent' : 'routine';
    const lead = urgency === 'urgent' ? rng.int(1, 3) * DAY + rng.int(0, 8) * HOUR : rng.int(5, 30) * DAY;
    let requested = e.start - lead;
    requested = Math.floor(requested / DAY) * DAY + rng.int(8, 17) * HOUR + rng.int(0, 59) * MINUTE;
    if (requested >= e.start) requested = e.start - rng.int(2, 20) * HOUR;
    if (requested < SPAN_START_MS || requested >= AS_OF) continue;
    const turnaround = urgency === 'urgent' ? rng.int(2, 70) * HOUR : rng.logNormal(3, 0.7, 0.2, 14) * DAY;
    let decided: number | null = Math.floor((requested + turnaround) / MINUTE) * MINUTE;
    let status: PriorAuth['status'] = rng.weighted<PriorAuth['status']>([['approved', 84], ['denied', 12], ['cancelled', 4]]);
    if (decided >= e.start && e.start < AS_OF) {
      // Decisions come before the service (retro-authorizations are rare): pull it back.
      decided = Math.max(requested + HOUR, e.start - rng.int(1, 12) * HOUR);
      if (decided >= e.start) decided = requested + MINUTE;
    }
    if (status === 'cancelled') decided = null;
    else if (decided >= AS_OF || (e.start >= AS_OF && rng.chance(0.6))) {
      // Not decided yet at the extract date (pended for clinical review).
      status = 'pending';
      decided = null;
    }
    const unitsRequested = rng.int(e.procedure.units[0], e.procedure.units[1]);
    const unitsApproved = status === 'approved' ? (unitsRequested > 1 && rng.chance(0.12) ? Math.max(1, Math.round(unitsRequested * rng.float(0.5, 0.9))) : unitsRequested) : null;
    const pa: PriorAuth = {
      id: '', enc: e, urgency, status, requested, decided, unitsRequested, unitsApproved,
      authNumber: status === 'approved' ? `AUTH${rng.alnum(10)}` : null,
      denial:
        status !== 'denied' ? null
        : e.procedure.code.startsWith('J') ? rng.pick(['Step therapy requirement not met', 'Not medically necessary based on submitted documentation', 'Service not covered under member plan'])
        : e.procedure.code === '97110' || e.procedure.code === '72148' || e.procedure.code === '73721' ? rng.pick(['Conservative therapy requirement not met', 'Insufficient clinical documentation', 'Not medically necessary based on submitted documentation'])
        : rng.pick(PA_DENIAL_REASONS.filter((r) => !r.startsWith('Step') && !r.startsWith('Conservative'))),
    };
    e.pa = pa;
    pas.push(pa);
    // A denied or cancelled authorization usually means the service did not happen.
    if ((status === 'denied' && rng.chance(0.7)) || status === 'cancelled') {
      if (e.status === 'finished' || e.status === 'in-progress' || e.status === 'arrived' || e.status === 'triaged') {
        e.status = 'cancelled';
        e.disposition = null;
      }
    }
  }
  pas.sort((a, b) => a.requested - b.requested);
  pas.forEach((p, i) => {
    p.id = textId('pa', i + 1);
  });

  const encounterRows: Cell[][] = encounters.map((e) => {
    const hasEnd = e.status === 'finished' || e.status === 'entered-in-error';
    return [
      e.id, e.patient.id, e.status, e.cls, CLASS_DISPLAY[e.cls], e.department, iso(e.start),
      hasEnd ? iso(e.end) : null, e.dx.code, e.dx.display, e.facility, e.practitioner.name, e.practitioner.npi,
      e.disposition, hasEnd ? Math.round((e.end - e.start) / MINUTE) : null,
    ];
  });

  const paRows: Cell[][] = pas.map((p) => [
    p.id, p.enc.patient.id, p.enc.id, p.enc.patient.payer.id,
    p.enc.procedure?.code ?? '', p.enc.procedure?.system ?? 'CPT', p.enc.procedure?.display ?? '', p.enc.dx.code,
    p.urgency, p.status, iso(p.requested), p.decided === null ? null : iso(p.decided), p.unitsRequested,
    p.unitsApproved, p.authNumber, p.denial,
  ]);

  // --- claims ------------------------------------------------------------------------------
  interface ClaimDraft {
    created: number;
    row: (id: string) => Cell[];
  }
  const claimDrafts: ClaimDraft[] = [];
  for (const e of encounters) {
    if (e.status !== 'finished' || e.patient.payer.kind === 'selfpay') continue;
    const payer = e.patient.payer;
    const types: ('institutional' | 'professional')[] = [];
    if (e.cls === 'AMB' || e.cls === 'VR') types.push('professional');
    else if (e.cls === 'HH') types.push('institutional');
    else {
      types.push('institutional');
      if (rng.chance(0.75)) types.push('professional');
    }
    for (const type of types) {
      const created = Math.floor((e.end + rng.logNormal(3, 0.8, 0.3, 40) * DAY) / MINUTE) * MINUTE;
      if (created >= AS_OF) continue;
      let status = rng.weighted<string>([['active', 92], ['cancelled', 3.5], ['draft', 3], ['entered-in-error', 1.5]]);
      let outcome: string;
      if (status === 'draft') outcome = 'queued';
      else if (status === 'entered-in-error') outcome = 'error';
      else if (status === 'cancelled') outcome = rng.chance(0.5) ? 'complete' : 'queued';
      else if (e.pa && e.pa.status === 'denied') outcome = rng.weighted<string>([['error', 70], ['complete', 20], ['partial', 10]]); // service delivered without approval
      else outcome = rng.weighted<string>([['complete', 83], ['partial', 8], ['error', 4], ['queued', 5]]);
      let adjudicated: number | null = null;
      if (outcome !== 'queued' && status !== 'draft') {
        adjudicated = Math.floor((created + rng.logNormal(14, 0.5, 2, 60) * DAY) / MINUTE) * MINUTE;
        if (adjudicated >= AS_OF) {
          adjudicated = null;
          if (status === 'active') outcome = 'queued';
        }
      }
      if (status === 'draft' && created < AS_OF - 60 * DAY && rng.chance(0.5)) status = 'cancelled';
      const pr = e.procedure && type === (e.cls === 'IMP' ? 'professional' : type) ? e.procedure : null;
      const paApproved = e.pa && e.pa.status === 'approved' ? e.pa : null;
      let service: readonly [string, string];
      let billed: number;
      if (pr && paApproved) {
        service = [pr.code, pr.display];
        billed = pr.charge * (paApproved.unitsApproved ?? 1) * rng.float(0.85, 1.2);
      } else {
        const em = rng.weighted(EM_CODES[e.cls].map((c) => [c, c[2]] as const));
        service = [em[0], em[1]];
        const days = Math.max(1, (e.end - e.start) / DAY);
        billed =
          type === 'professional'
            ? (e.cls === 'IMP' ? 420 * Math.min(days, 8) : e.cls === 'EMER' ? 520 : e.cls === 'VR' ? 135 : 190) * rng.logNormal(1, 0.3)
            : e.cls === 'IMP' ? 4200 * days * rng.logNormal(1, 0.35)
            : e.cls === 'OBSENC' ? rng.logNormal(5200, 0.35)
            : e.cls === 'EMER' ? rng.logNormal(2600, 0.55)
            : rng.logNormal(900, 0.3);
      }
      const total = round2(Math.max(25, billed));
      let allowed: number | null = null;
      let paid: number | null = null;
      let patientShare: number | null = null;
      let reason: string | null = null;
      if (adjudicated !== null && (outcome === 'complete' || outcome === 'partial')) {
        const ratio = payer.kind === 'medicare' ? rng.float(0.22, 0.45) : payer.kind === 'medicaid' ? rng.float(0.18, 0.35) : rng.float(0.4, 0.75);
        allowed = round2(total * ratio * (outcome === 'partial' ? rng.float(0.4, 0.8) : 1));
        const coinsurance = payer.kind === 'medicaid' ? rng.float(0, 0.03) : rng.float(0.05, 0.3);
        paid = round2(allowed * (1 - coinsurance));
        patientShare = round2(allowed - paid);
        if (outcome === 'partial') reason = rng.pick(CLAIM_PARTIAL_REASONS);
      } else if (outcome === 'error') {
        reason = e.procedure && (!e.pa || e.pa.status === 'denied') ? (e.pa ? rng.pick([CLAIM_ERROR_REASONS[1], CLAIM_ERROR_REASONS[2]]) : CLAIM_ERROR_REASONS[1]) : rng.pick(CLAIM_ERROR_REASONS);
      }
      const row = (id: string): Cell[] => [
        id, e.patient.id, e.id, paApproved ? paApproved.id : null, payer.id, payer.name, type, status, outcome,
        iso(created), isoDate(e.start), isoDate(e.end), e.dx.code, e.dx.display, service[0], service[1],
        total, allowed, paid, patientShare, adjudicated === null ? null : iso(adjudicated), reason,
      ];
      claimDrafts.push({ created, row });
    }
  }
  claimDrafts.sort((a, b) => a.created - b.created);
  const claimRows = claimDrafts.map((c, i) => c.row(textId('clm', i + 1)));

  // --- coverage eligibility ------------------------------------------------------------------
  interface EligDraft {
    created: number;
    row: (id: string) => Cell[];
  }
  const eligDrafts: EligDraft[] = [];
  const makeElig = (patient: Patient, enc: Encounter | null, purpose: string, created: number): void => {
    if (created < SPAN_START_MS || created >= AS_OF) return;
    const selfPay = patient.payer.kind === 'selfpay';
    let status = rng.weighted<string>([['active', 97], ['cancelled', 2], ['entered-in-error', 1]]);
    let outcome: string;
    if (status === 'entered-in-error') outcome = 'error';
    else if (status === 'cancelled') outcome = 'queued';
    else outcome = rng.weighted<string>([['complete', 86], ['error', 7], ['partial', 4], ['queued', 3]]);
    const responded = outcome === 'queued' ? null : created + rng.int(2, 90) * 1000;
    if (purpose === 'discovery' && selfPay) {
      // Coverage discovery for an uninsured patient: usually nothing is found.
      const found = outcome === 'complete' && rng.chance(0.15);
      const plan = found ? at(PAYERS, 2) : null;
      const row = (id: string): Cell[] => [
        id, patient.id, enc ? enc.id : null, plan ? plan.id : null, purpose, status, outcome, iso(created),
        responded === null ? null : iso(Math.floor(responded / 1000) * 1000),
        outcome === 'complete' || outcome === 'partial' ? found : null, plan ? plan.name : null,
        plan ? `MCD${rng.digits(9)}` : null, null, null, null,
        outcome === 'error' ? rng.pick(AAA_ERRORS) : null,
      ];
      eligDrafts.push({ created, row });
      return;
    }
    if (selfPay) return;
    const payer = patient.payer;
    const answered = outcome === 'complete' || outcome === 'partial';
    const inforce = answered ? rng.chance(0.96) : null;
    const benefits = purpose === 'benefits' && answered && inforce === true;
    const copay = benefits ? (payer.kind === 'medicaid' ? rng.pick([0, 0, 1, 3]) : rng.pick([0, 10, 20, 25, 30, 40, 50, 75, 150, 250])) : null;
    const deductible = benefits && outcome === 'complete' ? round2(payer.kind === 'medicaid' ? 0 : rng.float(0, payer.kind === 'medicare' ? 257 : 4500)) : null;
    const authRequired = purpose === 'auth-requirements' && answered ? (enc?.procedure ? rng.chance(0.9) : rng.chance(0.3)) : null;
    if (status === 'active' && outcome === 'error' && rng.chance(0.05)) status = 'cancelled';
    const row = (id: string): Cell[] => [
      id, patient.id, enc ? enc.id : null, payer.id, purpose, status, outcome, iso(created),
      responded === null ? null : iso(Math.floor(responded / 1000) * 1000), inforce, answered ? payer.name : null,
      answered ? patient.memberId : null, copay, deductible, authRequired,
      outcome === 'error' ? rng.pick(AAA_ERRORS) : null,
    ];
    eligDrafts.push({ created, row });
  };
  for (const e of encounters) {
    if (e.status === 'entered-in-error') continue;
    const p = e.patient;
    if (p.payer.kind === 'selfpay') {
      if (e.cls === 'EMER' || e.cls === 'IMP') makeElig(p, e, 'discovery', e.start + rng.int(20, 240) * MINUTE);
      continue;
    }
    if (e.pa) makeElig(p, e, 'auth-requirements', e.pa.requested - rng.int(30, 72 * 60) * MINUTE);
    const emergent = e.cls === 'EMER' || (e.cls === 'IMP' && !e.procedure);
    if (rng.chance(emergent ? 0.55 : 0.4)) {
      const created = emergent ? e.start + rng.int(10, 180) * MINUTE : e.start - rng.int(0, 3) * DAY - rng.int(30, 600) * MINUTE;
      makeElig(p, e, rng.chance(0.55) ? 'validation' : 'benefits', created);
    }
  }
  // Standalone checks (annual benefits verification, batch eligibility runs).
  for (let i = 0; i < 450; i++) {
    const p = at(patients, rng.int(0, patients.length - 1));
    makeElig(p, null, p.payer.kind === 'selfpay' ? 'discovery' : rng.pick(['benefits', 'benefits', 'validation']), rng.businessTimeMs(SPAN_START_MS, AS_OF, 0.3, 0.05));
  }
  eligDrafts.sort((a, b) => a.created - b.created);
  const eligRows = eligDrafts.map((d, i) => d.row(textId('cer', i + 1)));

  // --- ADT events -------------------------------------------------------------------------------
  interface AdtDraft {
    at: number;
    seq: number;
    trigger: 'A01' | 'A02' | 'A03' | 'A04' | 'A08';
    enc: Encounter;
    location: string;
    prior: string | null;
  }
  const adt: AdtDraft[] = [];
  let seq = 0;
  const push = (d: Omit<AdtDraft, 'seq'>): void => {
    if (d.at < SPAN_START_MS || d.at >= AS_OF) return;
    adt.push({ ...d, seq: seq++ });
  };
  for (const e of encounters) {
    if (e.status === 'planned' || e.status === 'cancelled' || e.status === 'entered-in-error') continue;
    const finished = e.status === 'finished';
    const stayEnd = Math.min(e.end, AS_OF);
    if (e.cls === 'IMP') {
      let loc = e.unit ?? 'MED-4W^401^A';
      push({ at: e.start, trigger: 'A01', enc: e, location: loc, prior: null });
      const transfers = stayEnd - e.start > 2 * DAY ? rng.weighted<number>([[0, 55], [1, 35], [2, 10]]) : 0;
      const times = Array.from({ length: transfers }, () => rng.timeMs(e.start + HOUR, stayEnd - HOUR)).sort((a, b) => a - b);
      const moves: [number, string][] = [];
      for (const t of times) {
        const unit = rng.pick(['MED-4W', 'MED-4E', 'MED-5W', 'ICU-2', 'STEPDOWN-3', 'CARD-3N', 'SURG-5E']);
        const next = `${unit}^${rng.int(1, 4)}${pad(rng.int(1, 30), 2)}^${rng.pick(['A', 'B'])}`;
        push({ at: t, trigger: 'A02', enc: e, location: next, prior: loc });
        moves.push([t, next]);
        loc = next;
      }
      if (rng.chance(0.35)) {
        const t = rng.timeMs(e.start + MINUTE, stayEnd);
        // The patient's location at the time of the update.
        let where = e.unit ?? loc;
        for (const [mt, ml] of moves) if (mt <= t) where = ml;
        push({ at: t, trigger: 'A08', enc: e, location: where, prior: null });
      }
      if (finished) push({ at: e.end, trigger: 'A03', enc: e, location: loc, prior: null });
    } else if (e.cls === 'EMER' || e.cls === 'OBSENC') {
      const loc = e.unit ?? 'ED^BAY01^A';
      push({ at: e.start, trigger: 'A04', enc: e, location: loc, prior: null });
      if (rng.chance(0.3)) push({ at: rng.timeMs(e.start + MINUTE, stayEnd), trigger: 'A08', enc: e, location: loc, prior: null });
      if (finished) push({ at: e.end, trigger: 'A03', enc: e, location: loc, prior: null });
    } else if (e.cls === 'AMB' && e.facility !== 'Lakeside Community Health Center' && rng.chance(0.55)) {
      push({ at: e.start - rng.int(5, 20) * MINUTE, trigger: 'A04', enc: e, location: e.facility, prior: null });
    }
  }
  adt.sort((a, b) => a.at - b.at || a.seq - b.seq);
  const ADT_DESC: Record<AdtDraft['trigger'], string> = {
    A01: 'Admit/visit notification',
    A02: 'Transfer a patient',
    A03: 'Discharge/end visit',
    A04: 'Register a patient',
    A08: 'Update patient information',
  };
  const controlBase = 7_300_000_000;
  const adtRows: Cell[][] = adt.map((d, i) => {
    const e = d.enc;
    const pclass = e.cls === 'IMP' ? 'I' : e.cls === 'EMER' ? 'E' : 'O';
    const facility = e.cls === 'AMB' ? 'RMG' : 'RGH';
    const attending = `${e.practitioner.npi}^${e.practitioner.family}^${e.practitioner.given}`;
    const controlId = `MSG${controlBase + i * 7 + (i % 5)}`;
    const ts = iso(d.at);
    const hl7ts = ts.slice(0, 19).replace(/[-:T]/g, '');
    return [
      textId('adt', i + 1, 7), controlId, d.trigger, `ADT^${d.trigger}`, ADT_DESC[d.trigger], e.patient.id, e.id, ts,
      pclass, d.location, d.prior, attending, facility,
      {
        MSH: { sending_application: e.cls === 'AMB' ? 'CLINIC_EHR' : 'HOSP_ADT', sending_facility: facility, message_type: `ADT^${d.trigger}^ADT_A01`, control_id: controlId, version: '2.5.1' },
        EVN: { event_type: d.trigger, recorded_at: hl7ts },
        PID: { patient_identifier: `${e.patient.mrn}^^^RGH^MR`, name: `${e.patient.family}^${e.patient.given}`, sex: e.patient.gender === 'male' ? 'M' : e.patient.gender === 'female' ? 'F' : e.patient.gender === 'other' ? 'O' : 'U' },
        PV1: { patient_class: pclass, assigned_location: d.location, prior_location: d.prior, visit_number: e.id, discharge_disposition: d.trigger === 'A03' ? e.disposition : null },
      },
    ];
  });

  return new Map<string, Cell[][]>([
    ['patients', patientRows],
    ['encounters', encounterRows],
    ['claims', claimRows],
    ['prior_authorizations', paRows],
    ['coverage_eligibility', eligRows],
    ['adt_events', adtRows],
  ]);
}

export const healthcare: DatasetDef = {
  targetId: TARGET_ID,
  pack: 'healthcare',
  name: 'Healthcare (FHIR-shaped EHR and payer feed)',
  description:
    'A synthetic regional health system, 2023-2025: patients, encounters (FHIR Encounter classes AMB/EMER/IMP/OBSENC/HH/VR with ICD-10-CM reasons), claims with adjudication outcomes, prior authorizations for CPT/HCPCS services, coverage eligibility checks and HL7 v2 ADT events. Extract date 2025-12-22.',
  schema: 'demo_healthcare',
  tables: TABLES,
  generate,
};
